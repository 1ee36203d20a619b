/**
 * `orchestrator approvals list|approve|deny`: tool calls waiting for an operator (APPROVAL=required
 * on the server). `list` reads GET /v1/approvals; `approve` and `deny` send `tool.approve` /
 * `tool.deny` through POST /v1/commands. The default command id is derived from the call, so
 * repeating the same answer is answered from its receipt; the other answer afterwards is refused
 * (422 approval-conflict), never a silent success.
 */
import { Args, Command, Options } from "@effect/cli"
import type { Api, ApprovalList } from "@orchestration/server"
import { Effect, Option } from "effect"
import { createHash } from "node:crypto"
import * as Connection from "../Connection.js"
import * as Render from "../Render.js"
import * as ServerClient from "../ServerClient.js"
import { optional, serverCommand, whenSome } from "../ServerCommand.js"
import { renderAnswer } from "./Effects.js"

type DispatchAnswer = typeof Api.DispatchAnswer.Type

export const renderApprovals = (list: typeof ApprovalList.Type): string =>
  list.approvals.length === 0
    ? "no calls await approval"
    : Render.table(
        ["THREAD", "CALL", "TOOL", "ARGUMENTS", "DEADLINE"],
        list.approvals.map((a) => [
          a.threadId,
          a.callId,
          a.name,
          a.undecodable === undefined
            ? Render.compact(a.arguments, 80)
            : Render.compact(`unreadable: ${a.undecodable}`, 80),
          Render.time(a.deadline)
        ])
      )

/**
 * The id an answer is sent under unless --command-id names one: the same answer (with the same note)
 * to a call is one command, answered from its receipt; another note is another command, which the
 * thread accepts as the same approval.
 */
export const answerCommandId = (
  verdict: "approve" | "deny",
  threadId: string,
  callId: string,
  text: string | undefined
): string =>
  `${verdict}-${createHash("sha256")
    .update(`${threadId}\u0000${callId}\u0000${text ?? ""}`)
    .digest("hex")
    .slice(0, 40)}`

const list = serverCommand(
  "list",
  {
    thread: optional(Options.text("thread"), "Only calls of this thread."),
    limit: Options.integer("limit").pipe(
      Options.withDescription("At most this many calls, earliest deadline first (1-500)."),
      Options.withDefault(100)
    )
  },
  {
    ask: (api, options) =>
      api.threads.approvals({ urlParams: { limit: options.limit, ...whenSome(options.thread, "threadId") } }),
    render: renderApprovals,
    description: "List the tool calls awaiting approval, with their arguments (GET /v1/approvals)."
  }
)

const threadId = Args.text({ name: "threadId" }).pipe(Args.withDescription("The call's thread."))
const callId = Args.text({ name: "callId" }).pipe(Args.withDescription("The call's id, as `approvals list` shows it."))
const commandId = Options.text("command-id").pipe(
  Options.withDescription("The command's id. Default: derived from the call, so repeating the answer is one answer."),
  Options.optional
)

const answer = (verdict: "approve" | "deny") =>
  Command.make(
    verdict,
    {
      ...Connection.connectionOptions,
      threadId,
      callId,
      commandId,
      text: Options.text(verdict === "approve" ? "note" : "reason").pipe(
        Options.withDescription(
          verdict === "approve"
            ? "A note kept with the approval."
            : "Why: the model reads it in the call's result (up to 2000 characters)."
        ),
        Options.optional
      )
    },
    (options) =>
      Effect.gen(function* () {
        const connection = yield* Connection.resolve(options)
        const text = Option.getOrUndefined(options.text)
        const payload = {
          commandId: Option.getOrElse(options.commandId, () =>
            answerCommandId(verdict, options.threadId, options.callId, text)
          ),
          type: verdict === "approve" ? "tool.approve" : "tool.deny",
          threadId: options.threadId,
          callId: options.callId,
          ...(text === undefined ? {} : verdict === "approve" ? { note: text } : { reason: text })
        }
        const dispatched: DispatchAnswer = yield* ServerClient.call(connection, (api) =>
          api.commands.dispatch({ payload })
        )
        yield* Render.output(connection.json, dispatched, (a) => renderAnswer(verdict, a))
      })
  ).pipe(
    Command.withDescription(
      verdict === "approve"
        ? "Approve a waiting call: its effect is written and it runs (tool.approve)."
        : "Deny a waiting call: it never runs and the model reads that it was denied, and why (tool.deny)."
    )
  )

export const approvals = Command.make("approvals").pipe(
  Command.withDescription("Tool calls awaiting an operator's approval (APPROVAL=required)."),
  Command.withSubcommands([list, answer("approve"), answer("deny")])
)
