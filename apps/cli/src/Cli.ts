/** The `orchestrator` command tree. */
import { Command } from "@effect/cli"
import { db } from "./commands/Db.js"
import { effects } from "./commands/Effects.js"
import { events } from "./commands/Events.js"
import { receipts } from "./commands/Receipts.js"
import { serve } from "./commands/Serve.js"
import { status } from "./commands/Status.js"
import { threads } from "./commands/Threads.js"
import { rootCommand } from "./Connection.js"

export const command = rootCommand.pipe(
  Command.withDescription(
    "Operate a durable orchestration server: run it, read its health, effects, events, threads and receipts over HTTP, " +
      "and check or back up its SQLite store offline. --url, --token and --json may also be given before the command."
  ),
  Command.withSubcommands([serve, status, effects, events, threads, receipts, db])
)

export const version = "0.1.0"

export const cli = Command.run(command, { name: "orchestrator", version })
