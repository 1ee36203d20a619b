/** `orchestrator receipts show <commandId>`: a command's receipt (GET /v1/commands/:commandId). */
import { Args, Command } from "@effect/cli"
import type { Api } from "@orchestration/server"
import * as Render from "../Render.js"
import * as ServerClient from "../ServerClient.js"
import { serverCommand } from "../ServerCommand.js"

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

const show = serverCommand(
  "show",
  { commandId: Args.text({ name: "commandId" }).pipe(Args.withDescription("The command's id.")) },
  {
    ask: (api, options) => api.commands.receipt({ path: { commandId: ServerClient.segment(options.commandId) } }),
    render: renderReceipt,
    description: "Show the receipt of a command: accepted or rejected, its aggregate, sequence and effects."
  }
)

export const receipts = Command.make("receipts").pipe(
  Command.withDescription("Command receipts: one per command id."),
  Command.withSubcommands([show])
)
