/**
 * `orchestrator threads show <threadId>`: the thread's turns, each tool call with its effect's
 * status and attempts, and whether the transcript validates (GET /v1/threads/:id, its transcript,
 * and the thread's effects).
 */
import { Args, Command } from "@effect/cli"
import type { Api, ThreadView, TranscriptView } from "@orchestration/server"
import { Effect } from "effect"
import * as Render from "../Render.js"
import * as ServerClient from "../ServerClient.js"
import { serverCommand } from "../ServerCommand.js"
import { watch } from "./ThreadWatch.js"

type EffectView = typeof Api.EffectView.Type

export interface ThreadReport {
  readonly thread: typeof ThreadView.Type
  readonly transcript: typeof TranscriptView.Type
  readonly effects: ReadonlyArray<EffectView>
}

export const renderThread = ({ thread, transcript, effects }: ThreadReport): string => {
  const byId = new Map(effects.map((e) => [e.effectId, e]))
  const problems = transcript.problems as ReadonlyArray<{ code?: string; message?: string }>
  // An unreadable message is not in `messages`: named first, as the validator's problems are about the rest.
  const why = [
    ...(transcript.unreadableMessages ?? []).map((m) => `message ${m.position} unreadable: ${m.why}`),
    ...problems.map((p) => `${p.code}: ${p.message}`)
  ]
  const head = Render.fields([
    ["thread", thread.threadId],
    ["title", thread.title || "-"],
    ["status", thread.status],
    [
      "transcript",
      transcript.valid
        ? `valid (${transcript.messages.length} messages)`
        : `INVALID (${transcript.messages.length} messages): ${why.join("; ")}`
    ]
  ])
  const turns =
    thread.turns.length === 0
      ? "no turns"
      : Render.table(
          ["TURN", "STATUS", "STEPS", "TOOL CALLS", "REASON"],
          thread.turns.map((t) => [t.turnId, t.status, String(t.steps), String(t.toolCalls.length), t.reason ?? "-"])
        )
  const calls = thread.turns.flatMap((t) =>
    t.toolCalls.map((c) => ({ turn: t.turnId, call: c, effect: byId.get(c.effectId) }))
  )
  const callTable =
    calls.length === 0
      ? "no tool calls"
      : Render.table(
          ["TURN", "CALL", "TOOL", "EFFECT", "STATUS", "ATTEMPTS", "RESULT"],
          calls.map(({ turn, call, effect }) => [
            turn,
            call.callId,
            call.name,
            call.effectId,
            effect?.status ?? call.status,
            effect === undefined ? "-" : String(effect.attempts),
            Render.compact(call.result, 60)
          ])
        )
  return [head, "", turns, "", callTable].join("\n")
}

const show = serverCommand(
  "show",
  { threadId: Args.text({ name: "threadId" }).pipe(Args.withDescription("The thread's id.")) },
  {
    ask: (api, options): Effect.Effect<ThreadReport, unknown> => {
      const path = { threadId: ServerClient.segment(options.threadId) }
      return Effect.all({
        thread: api.threads.thread({ path }),
        transcript: api.threads.transcript({ path }),
        effects: Effect.map(
          api.effects.list({ urlParams: { aggregateId: options.threadId, limit: 1000 } }),
          (a) => a.effects
        )
      })
    },
    render: renderThread,
    description:
      "Show a thread: its turns, each tool call with its effect's status and attempts, and whether its transcript is valid."
  }
)

export const threads = Command.make("threads").pipe(
  Command.withDescription("Agent threads."),
  Command.withSubcommands([show, watch])
)
