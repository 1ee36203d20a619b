/**
 * Which model step of an agents thread is live, read from the thread's own events (ThreadEvents):
 * `turn.started` makes step 1 live; `model.responded` closes the step it answers (its text is the
 * step's answer) and, when it asked for tools, step n+1 is live next (its effect is written when
 * the last result is in, or never when the turn ends first); `turn.completed` / `turn.ended` /
 * `thread.deleted` close whatever is live. A step's effect id is the thread's own (`stepEffectId`),
 * and its outbox payload holds `{ threadId, turnId, step }`, so effect id and (turn, step) map
 * both ways without a lookup table. A tool call's argument deltas stream in channel `tool:<callId>`
 * (StepStreams), sent as `event: tool-delta`.
 */
import { StepStreams, Thread } from "@orchestration/agents"
import type { EventRecord } from "@orchestration/engine"
import { Schema } from "effect"
import type { StepRef, StepTransition, ThreadStreamRules } from "./ThreadStream.js"

const Started = Schema.Struct({ type: Schema.Literal("turn.started"), turnId: Schema.String })
const Responded = Schema.Struct({
  type: Schema.Literal("model.responded"),
  turnId: Schema.String,
  step: Schema.Number,
  toolCalls: Schema.Array(Schema.Unknown)
})
const Completed = Schema.Struct({ type: Schema.Literal("turn.completed", "thread.deleted") })
const Ended = Schema.Struct({
  type: Schema.Literal("turn.ended"),
  status: Schema.Literal("failed", "interrupted"),
  reason: Schema.String
})
const Relevant = Schema.decodeUnknownOption(Schema.Union(Started, Responded, Completed, Ended))

/** Pure: what the event does to the live step; undefined when nothing. */
export const transition = (_live: StepRef | null, event: EventRecord): StepTransition | undefined => {
  const payload = typeof event.payload === "object" && event.payload !== null ? event.payload : {}
  const decoded = Relevant({ ...payload, type: event.type })
  if (decoded._tag === "None") return undefined
  const e = decoded.value
  switch (e.type) {
    case "turn.started":
      return { next: { turnId: e.turnId, step: 1 } }
    case "model.responded":
      return {
        close: { status: "completed" },
        next: e.toolCalls.length > 0 ? { turnId: e.turnId, step: e.step + 1 } : null
      }
    case "turn.completed":
    case "thread.deleted":
      return { close: { status: "completed" }, next: null }
    case "turn.ended":
      return { close: { status: e.status, reason: e.reason }, next: null }
  }
}

export const rules: ThreadStreamRules = {
  aggregateType: "thread",
  transition,
  stepEffectId: (step) => Thread.stepEffectId(step.turnId, step.step),
  toolCallOfChannel: StepStreams.toolCallOfChannel
}
