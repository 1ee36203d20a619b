/**
 * The server as a process, for any domain: config → open store → migrate → reconcile → listen →
 * activate, one start-up line, JSON-line logs; SIGTERM/SIGINT shut it down gracefully and exit 0.
 * A bad variable (exit 2), a store held by another process or a taken port (exit 1) stop it with a
 * clear message. `main.ts` runs it with the domain of `domain.ts`.
 */
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { FaultPoints, storageFaultsFromSpec } from "@orchestration/engine"
import { Cause, Effect, Either, Layer, Logger } from "effect"
import { parseConfig, type ServerConfig } from "./Config.js"
import { createServer } from "./http/HttpListener.js"
import * as Server from "./Server.js"
import type { AnyServerDomain } from "./ServerDomain.js"

/** Serves until interrupted (a signal), after one start-up line with a curl example. */
export const program = (
  config: ServerConfig,
  domain: AnyServerDomain,
  env: Readonly<Record<string, string | undefined>>
) =>
  Effect.gen(function* () {
    // STORAGE_FAULTS (environment only) makes the store refuse chosen writes: the chaos harness's I/O-error mode.
    const faults =
      config.storageFaults === undefined ? {} : { storageFaults: storageFaultsFromSpec(config.storageFaults) }
    const started = yield* Server.start(
      { config, domain, env, ...faults },
      NodeHttpServer.layer(() => createServer(config.shutdownGraceMs), { port: config.port, host: config.host })
    )
    const { reconciled } = started.state
    const database =
      config.databaseUrl === undefined ? config.databaseFile : `postgres (schema ${config.databaseSchema})`
    const token = config.apiToken === undefined ? "" : ` -H "authorization: Bearer $API_TOKEN"`
    const authentication =
      config.apiToken === undefined ? "authentication OFF (no API_TOKEN)" : "authentication: bearer token"
    const example = JSON.stringify({
      commandId: `example-${Date.now()}`,
      ...(domain.exampleCommand ?? { type: "<type>" })
    })
    yield* Effect.logInfo(
      `serving ${started.url} (domain: ${domain.name}; database ${database}; node ${config.nodeId}; ${authentication}; reconcile settled ` +
        `${reconciled.requeued} requeued, ${reconciled.failed} failed, ${reconciled.alreadySettled} already settled` +
        (reconciled.quarantined > 0
          ? `, ${reconciled.quarantined} QUARANTINED: see orchestrator effects list --status quarantined)`
          : ")")
    ).pipe(
      Effect.annotateLogs({
        url: started.url,
        database,
        reconciled,
        try: `curl -s${token} -X POST ${started.url}/v1/commands -H 'content-type: application/json' -d '${example}'`,
        docs: `${started.url}/docs`
      })
    )
    return yield* Effect.never
  }).pipe(
    // In an Effect, so a bad spec is reported as the start-up failure it is.
    Effect.provideServiceEffect(
      FaultPoints.FaultPoints,
      Effect.sync(() => FaultPoints.forProcess(config.faultPoints))
    ),
    Effect.scoped,
    Effect.tapErrorCause((cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.void
        : Effect.sync(() => {
            const failure = Cause.squash(cause)
            const messageOf = (value: unknown): string =>
              typeof value === "object" && value !== null && "message" in value ? String(value.message) : String(value)
            // A listen failure (ServeError) carries no message of its own: say its cause (ENOTFOUND, EADDRINUSE…).
            const underlying =
              typeof failure === "object" && failure !== null && "cause" in failure ? failure.cause : undefined
            const message = messageOf(failure) || (underlying === undefined ? "" : messageOf(underlying))
            const tag =
              typeof failure === "object" && failure !== null && "_tag" in failure ? `${String(failure._tag)}: ` : ""
            console.error(`server did not start: ${tag}${message}`)
          })
    ),
    Effect.provide(Layer.merge(Logger.json, Logger.minimumLogLevel(config.logLevel)))
  )

export const run = (domain: AnyServerDomain): void => {
  const parsed = parseConfig(process.env)
  if (Either.isLeft(parsed)) {
    console.error(`configuration error: ${parsed.left.message}`)
    process.exit(2)
  }
  // runMain interrupts the program on SIGTERM/SIGINT; an interrupted program exits 0.
  NodeRuntime.runMain(program(parsed.right, domain, process.env), {
    disableErrorReporting: true,
    disablePrettyLogger: true
  })
}
