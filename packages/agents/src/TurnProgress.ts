/**
 * How a turn moves on, shared by the Thread's deciders: a turn starts with its first model step, goes
 * on with the next step once a step's calls are all answered (or ends at the step limit), and ends
 * with one synthetic result for every call left unanswered, so each call has exactly one result.
 * Pure, like the aggregate: each function returns the Decision the caller's command makes.
 */
import { Decision, type EffectIntent, Waits } from "@orchestration/engine"
import { Schema } from "effect"
import { waitNameOf } from "./Approval.js"
import * as MessageQueue from "./MessageQueue.js"
import {
  type ActiveTurn,
  approvalOf,
  type CallRecord,
  type ResultRecord,
  stepEffectId,
  type ThreadEvent,
  type ThreadState,
  turnIdOf
} from "./ThreadEvents.js"
/** The payload of a `model.step` row: the step of a thread's turn. */
export const ModelStepPayload = Schema.Struct({ threadId: Schema.String, turnId: Schema.String, step: Schema.Number })
export type ModelStepPayload = typeof ModelStepPayload.Type

export const modelStep = (threadId: string, turnId: string, step: number): EffectIntent => ({
  id: stepEffectId(turnId, step),
  kind: "model.step",
  payload: { threadId, turnId, step } satisfies ModelStepPayload
})

/** Starts the turn of a message: the user message enters the transcript now, never earlier. */
export const startTurn = (state: ThreadState, threadId: string, messageId: string, text: string) => {
  const turnId = turnIdOf(threadId, messageId)
  return {
    events: [{ type: "turn.started", turnId, ordinal: state.turns + 1, messageId, text } as const],
    effects: [modelStep(threadId, turnId, 1)]
  }
}

/** After a turn ends: the next queued message starts its turn, in order. */
export const startNextQueued = (state: ThreadState, threadId: string) => {
  const next = MessageQueue.head(state.queue)
  return next === undefined || state.deleted
    ? { events: [], effects: [] }
    : startTurn(state, threadId, next.messageId, next.text)
}

/** Ends the active turn: synthetic results for unanswered calls, cancels, then the next turn. */
export const endTurn = (
  state: ThreadState,
  active: ActiveTurn,
  threadId: string,
  status: "failed" | "interrupted",
  reason: string,
  extra: { readonly events?: ReadonlyArray<ThreadEvent>; readonly answered?: ReadonlyArray<string> } = {}
): Decision<ThreadEvent> => {
  const answered = [...active.answered, ...(extra.answered ?? [])]
  const unanswered = active.calls.filter((c) => !answered.includes(c.transcriptId))
  // A call still waiting for approval has no effect row: its wait closes, its deadline timer goes.
  const waiting = unanswered.filter((c) => approvalOf(state, c.transcriptId)?.verdict === null)
  const isWaiting = (c: CallRecord) => waiting.includes(c)
  const synthetic = unanswered.map(
    (c): ResultRecord => ({
      callId: c.callId,
      transcriptId: c.transcriptId,
      effectId: c.effectId,
      content: isWaiting(c)
        ? `${status}: the turn ${status === "failed" ? "failed" : "was interrupted"} while this call waited for approval (${reason}); it was not performed`
        : `${status}: the turn ${status === "failed" ? "failed" : "was interrupted"} before this call finished (${reason})${whatStopping(c)}`,
      outcome: status === "failed" ? "failed" : "interrupted"
    })
  )
  const cancelled = waiting.map(
    (c): ThreadEvent => ({
      type: "approval.closed",
      turnId: active.turnId,
      transcriptId: c.transcriptId,
      verdict: "cancelled",
      note: reason
    })
  )
  const ended: ThreadEvent = { type: "turn.ended", turnId: active.turnId, status, reason, synthetic }
  const after = { ...state, active: null }
  const next = startNextQueued(after, threadId)
  return Decision.of<ThreadEvent>({
    events: [...(extra.events ?? []), ...cancelled, ended, ...next.events],
    effects: next.effects,
    cancel: [active.stepEffectId, ...unanswered.filter((c) => !isWaiting(c)).map((c) => c.effectId)].map(
      (effectId) => ({ effectId, reason })
    ),
    cancelTimers: waiting.map((c) => Waits.timerIdOf(waitNameOf(c.transcriptId)))
  })
}

/**
 * For a call its turn's end cancels: the engine stops a running performance (CancelWatch), and for
 * a command that means its processes are ended. The decider cannot know whether it had started.
 */
const whatStopping = (call: CallRecord): string => {
  if (call.name !== "execute") return ""
  const command = JSON.stringify((call.arguments as { command?: unknown } | undefined)?.command ?? "")
  return `; the command ${command}, if it had started, was stopped (its processes are ended) and may have partly run`
}

/** The next model step once a step's results are all in, or the end of the turn at the step limit. */
export const continueTurn = (
  state: ThreadState,
  active: ActiveTurn,
  threadId: string,
  results: ReadonlyArray<ThreadEvent>,
  stepLimit: number
): Decision<ThreadEvent> => {
  const next = active.step + 1
  if (next > stepLimit) {
    return endTurn(state, active, threadId, "failed", `step limit of ${stepLimit} model steps reached`, {
      events: results,
      answered: active.calls.map((c) => c.transcriptId)
    })
  }
  return Decision.of<ThreadEvent>({ events: results, effects: [modelStep(threadId, active.turnId, next)] })
}

/** A call's one result; when it is the step's last, the next model step (or the step limit) follows. */
export const answerCall = (
  state: ThreadState,
  active: ActiveTurn,
  threadId: string,
  call: CallRecord,
  result: ResultRecord,
  stepLimit: number,
  before: ReadonlyArray<ThreadEvent> = []
): Decision<ThreadEvent> => {
  const resultEvent: ThreadEvent = { type: "tool.result", turnId: active.turnId, result }
  const answered = [...active.answered, call.transcriptId]
  if (!active.calls.every((c) => answered.includes(c.transcriptId)))
    return Decision.of<ThreadEvent>({ events: [...before, resultEvent] })
  return continueTurn(state, { ...active, answered }, threadId, [...before, resultEvent], stepLimit)
}
