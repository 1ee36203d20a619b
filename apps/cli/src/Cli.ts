/** The `orchestrator` command tree. */
import { CliConfig, Command } from "@effect/cli"
import * as Descriptor from "@effect/cli/CommandDescriptor"
import { Effect, Option } from "effect"
import { db } from "./commands/Db.js"
import { effects } from "./commands/Effects.js"
import { events } from "./commands/Events.js"
import { receipts } from "./commands/Receipts.js"
import { serve } from "./commands/Serve.js"
import { status } from "./commands/Status.js"
import { threads } from "./commands/Threads.js"
import { approvals } from "./commands/Approvals.js"
import { timers } from "./commands/Timers.js"
import { triggers } from "./commands/Triggers.js"
import { rootCommand } from "./Connection.js"
import * as Help from "./Help.js"

export const command = rootCommand.pipe(
  Command.withDescription(
    "Operate a durable orchestration server: run it, read its health, effects, events, threads, approvals, triggers, timers and receipts over HTTP, " +
      "and check or back up its SQLite store offline. --url, --token and --json may also be given before the command."
  ),
  Command.withSubcommands([serve, status, effects, events, threads, approvals, triggers, timers, receipts, db])
)

export const version = "0.1.0"

const app = { name: "orchestrator", version }

const run = Command.run(command, app)

/**
 * Runs the command line. `--help` is answered here, from the parsed help document, so each option
 * shows its own description (Help.ts); everything else, usage errors included, is @effect/cli's.
 */
export const cli = (argv: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const config = CliConfig.defaultConfig
    const directive = yield* Descriptor.parse(command.descriptor, [app.name, ...argv.slice(2)], config).pipe(
      // swallow-ok: `run` parses the same arguments again and reports this error itself.
      Effect.option
    )
    if (Option.isSome(directive) && directive.value._tag === "BuiltIn" && directive.value.option._tag === "ShowHelp") {
      return yield* Help.print(app, directive.value.option, config)
    }
    return yield* run(argv)
  }).pipe(Help.withTerminalColour)
