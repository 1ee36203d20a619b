/**
 * `orchestrator serve`: the server process exactly as apps/server's main.ts runs it (the same domain,
 * configuration from the environment, JSON-line logs, graceful shutdown on SIGTERM/SIGINT, exit 0).
 */
import { Command, Options } from "@effect/cli"
import { Config, loadDomain, ServerProcess } from "@orchestration/server"
import { Effect, Either, Option } from "effect"
import { ServeFailed, UsageError } from "../CliErrors.js"
import { optional, whenSome } from "../ServerCommand.js"

export const serve = Command.make(
  "serve",
  {
    dataDir: optional(
      Options.text("data-dir"),
      "Sets DATA_DIR: where the database and the world directory live (default ./data)."
    ),
    port: optional(Options.integer("port"), "Sets PORT (default 8787; 0 picks a free port).")
  },
  (options) =>
    Effect.gen(function* () {
      const env: Record<string, string | undefined> = {
        ...process.env,
        ...whenSome(options.dataDir, "DATA_DIR"),
        ...whenSome(Option.map(options.port, String), "PORT")
      }
      const config = Config.parseConfig(env)
      if (Either.isLeft(config))
        return yield* new UsageError({ message: `configuration error: ${config.left.message}` })
      const domain = yield* Effect.promise(loadDomain)
      // The program prints its own start-up line and, on failure, why it did not start.
      return yield* ServerProcess.program(config.right, domain, env).pipe(
        Effect.mapError(() => new ServeFailed({ message: "the server did not start" }))
      )
    })
).pipe(
  Command.withDescription(
    "Run the server (the agents domain) until SIGTERM/SIGINT. Configured by the environment like apps/server: PORT, HOST, DATA_DIR, " +
      "DISK_FLOOR_BYTES, PROVIDER, OPENAI_*, API_TOKEN, LOG_LEVEL, SHUTDOWN_GRACE_MS, NODE_ID, WORLD_DIR."
  )
)
