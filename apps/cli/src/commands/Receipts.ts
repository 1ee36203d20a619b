/** `orchestrator receipts show <commandId>`: a command's receipt (GET /v1/commands/:commandId). */
import { Args, Command } from "@effect/cli"
import type { Api } from "@orchestration/server"
import { Effect } from "effect"
import * as Connection from "../Connection.js"
import * as Render from "../Render.js"
import * as ServerClient from "../ServerClient.js"

type ReceiptView = typeof Api.ReceiptView.Type

export const renderReceipt = (r: ReceiptView): string =>
  Render.fields([
    ["command", r.commandId],
    ["status", r.status],
    ["type", r.commandType],
    ["aggregate", `${r.aggregateType}/${r.aggregateId}`],
    ["sequence", String(r.sequence)],
    ["effects", r.effectIds.length === 0 ? "-" : r.effectIds.join(", ")],
    ...(r.rejection === undefined ? [] : [["rejection", `${r.rejection.reason}: ${r.rejection.message}`] as const]),
    ["at", Render.time(r.acceptedAt)]
  ])

const show = Command.make(
  "show",
  {
    ...Connection.connectionOptions,
    commandId: Args.text({ name: "commandId" }).pipe(Args.withDescription("The command's id."))
  },
  (options) =>
    Effect.gen(function* () {
      const connection = yield* Connection.resolve(options)
      const receipt = yield* ServerClient.call(connection, (api) =>
        api.commands.receipt({ path: { commandId: ServerClient.segment(options.commandId) } })
      )
      yield* Render.output(connection.json, receipt, renderReceipt)
    })
).pipe(
  Command.withDescription("Show the receipt of a command: accepted or rejected, its aggregate, sequence and effects.")
)

export const receipts = Command.make("receipts").pipe(
  Command.withDescription("Command receipts: one per command id."),
  Command.withSubcommands([show])
)
