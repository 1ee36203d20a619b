/**
 * What a thread records and what it remembers: its events, the state they fold into, and the
 * deterministic ids of its turns and effects. The decider (Thread.ts) reads this state; the read
 * model and the transcript are projections of these events.
 */
import { Aggregate, CommandId, TimerFailures, Waits } from "@orchestration/engine"
import { HashMap, HashSet, Option, Schema } from "effect"
import { DelegationEvent, type DelegationState, evolveDelegation, initialDelegation } from "./DelegationEvents.js"
import { waitNameOf } from "./Approval.js"
import * as MessageQueue from "./MessageQueue.js"

/** Thread and message ids: short, and safe to embed in effect and command ids. */
export const ThreadId = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9._-]{1,128}$/, { description: "1-128 of A-Z a-z 0-9 . _ -" })
)
export const MessageId = ThreadId

export const DEFAULT_STEP_LIMIT = 20

// ---- events ---------------------------------------------------------------------------------

const CallRecord = Schema.Struct({
  callId: Schema.String,
  /**
   * The call's own id, unique in the thread: the provider's, unless an earlier call of the thread
   * (this step's, an earlier step's or turn's) used it. Effect ids and answers are keyed by it.
   */
  transcriptId: Schema.String,
  effectId: Schema.String,
  name: Schema.String,
  arguments: Schema.Unknown,
  /** When the model asked for it (epoch ms); its performance starts at or after this. */
  at: Schema.optional(Schema.Number)
})
export type CallRecord = typeof CallRecord.Type

const resultOutcomes = ["succeeded", "failed", "interrupted", "cancelled", "unknown-tool", "storage", "denied"] as const
export const ResultOutcome = Schema.Literal(...resultOutcomes)
const ResultRecord = Schema.Struct({
  callId: Schema.String,
  transcriptId: Schema.String,
  effectId: Schema.String,
  content: Schema.String,
  outcome: ResultOutcome
})
export type ResultRecord = typeof ResultRecord.Type

export const ApprovalVerdict = Schema.Literal("approved", "denied", "expired", "cancelled")
export type ApprovalVerdict = typeof ApprovalVerdict.Type

export const ThreadEvent = Schema.Union(
  Aggregate.event("thread.created", { title: Schema.NullOr(Schema.String) }),
  Aggregate.event("message.queued", { messageId: Schema.String, turnId: Schema.String, text: Schema.String }),
  Aggregate.event("turn.started", {
    turnId: Schema.String,
    ordinal: Schema.Number,
    messageId: Schema.String,
    text: Schema.String
  }),
  Aggregate.event("model.responded", {
    turnId: Schema.String,
    step: Schema.Number,
    text: Schema.String,
    toolCalls: Schema.Array(CallRecord)
  }),
  Aggregate.event("tool.result", { turnId: Schema.String, result: ResultRecord }),
  Aggregate.event("turn.completed", { turnId: Schema.String, steps: Schema.Number, text: Schema.String }),
  Aggregate.event("turn.ended", {
    turnId: Schema.String,
    status: Schema.Literal("failed", "interrupted"),
    reason: Schema.String,
    /** One result for each call still unanswered, so the next turn replays validly. */
    synthetic: Schema.Array(ResultRecord)
  }),
  /** A call waits for an operator: its effect, not yet written, is kept here until it is approved. */
  Aggregate.event("approval.requested", {
    turnId: Schema.String,
    transcriptId: Schema.String,
    effect: Schema.Struct({ id: Schema.String, kind: Schema.String, payload: Schema.Unknown }),
    deadline: Schema.Number,
    timeoutMs: Schema.Number,
    /** The opening command's id: a deadline of an earlier opening is stale (Waits.ts). */
    token: Schema.String
  }),
  /** The wait closed: approved (its effect is written now), denied, expired, or cancelled with its turn. */
  Aggregate.event("approval.closed", {
    turnId: Schema.String,
    transcriptId: Schema.String,
    verdict: ApprovalVerdict,
    note: Schema.NullOr(Schema.String)
  }),
  /**
   * The deadline of one of the running turn's waits can never fire (TimerFailures.ts says why): the
   * approval deadline of call `transcriptId`, or the deadline of its awaited delegate. The turn ends
   * failed with it, in the same decision (DeadlineFailures.ts).
   */
  Aggregate.event("turn.timer-failed", {
    turnId: Schema.String,
    wait: Schema.Literal("approval", "delegate"),
    transcriptId: Schema.String,
    timerId: Schema.String,
    /** When the deadline was due, epoch ms. */
    at: Schema.Number,
    reason: TimerFailures.TimerFailureReason,
    message: Schema.String
  }),
  Aggregate.event("effect.late", { turnId: Schema.String, effectId: Schema.String, status: Schema.String }),
  Aggregate.event("thread.deleted", {}),
  Aggregate.event("thread.cleaned", {}),
  ...DelegationEvent
)
export type ThreadEvent = typeof ThreadEvent.Type

// ---- state ----------------------------------------------------------------------------------

export interface ActiveTurn {
  readonly turnId: string
  readonly ordinal: number
  readonly step: number
  readonly stepEffectId: string
  /** Calls of the current step, and which of them have their result (by transcript id). */
  readonly calls: ReadonlyArray<CallRecord>
  readonly answered: ReadonlyArray<string>
}

/** A call that waited (or waits) for approval; kept for the thread's life, so a late answer is judged. */
export interface ApprovalRecord {
  readonly turnId: string
  /** The withheld effect while the wait is open; dropped once it closes (the state keeps only the verdict). */
  readonly effect: { readonly id: string; readonly kind: string; readonly payload: unknown } | null
  readonly timeoutMs: number
  readonly verdict: ApprovalVerdict | null
}

export interface ThreadState {
  readonly exists: boolean
  readonly deleted: boolean
  readonly turns: number
  readonly active: ActiveTurn | null
  /** Messages waiting for the running turn to end, in order (MessageQueue.ts). */
  readonly queue: MessageQueue.MessageQueue
  /**
   * Every message id and transcript id the thread has seen, for its life. Persistent sets: adding one
   * shares the rest, where arrays were copied whole on every event (a thread months old then took
   * minutes to fold, and each event copied tens of thousands of ids).
   */
  readonly messageIds: HashSet.HashSet<string>
  readonly transcriptIds: HashSet.HashSet<string>
  /** Delegate-and-await: answers this thread owes and calls of it that wait (DelegationEvents.ts). */
  readonly delegation: DelegationState
  /** Approval waits by name (`approval.<transcriptId>`), race-safe open / answer / timeout. */
  readonly waits: Waits.WaitsState
  /** By transcript id, for the thread's life: a persistent map, for the reason `messageIds` is a set. */
  readonly approvals: HashMap.HashMap<string, ApprovalRecord>
}

export const initialState: ThreadState = {
  exists: false,
  deleted: false,
  turns: 0,
  active: null,
  queue: MessageQueue.empty,
  messageIds: HashSet.empty(),
  transcriptIds: HashSet.empty(),
  delegation: initialDelegation,
  waits: Waits.empty,
  approvals: HashMap.empty()
}

/** The approval record of call `transcriptId`, if it ever waited for one. */
export const approvalOf = (state: ThreadState, transcriptId: string): ApprovalRecord | undefined =>
  Option.getOrUndefined(HashMap.get(state.approvals, transcriptId))

// ---- ids --------------------------------------------------------------------------------------

export const turnIdOf = (threadId: string, messageId: string) => `${threadId}:${messageId}`
export const stepEffectId = (turnId: string, step: number) => CommandId.boundedId("step:", `${turnId}#${step}`)
export const toolEffectId = (turnId: string, callId: string) => CommandId.boundedId("tool:", `${turnId}:${callId}`)
export const cleanupEffectId = (threadId: string) => CommandId.boundedId("cleanup:", threadId)

/** The payload of a `thread.cleanup` row: the deleted thread. */
export const CleanupPayload = Schema.Struct({ threadId: Schema.String })
export type CleanupPayload = typeof CleanupPayload.Type

/** Folds one event into the state. Pure. */
export const evolve = (state: ThreadState, event: ThreadEvent): ThreadState => {
  const next = evolveThread(state, event)
  return { ...next, delegation: evolveDelegation(next.delegation, event) }
}

const evolveThread = (state: ThreadState, event: ThreadEvent): ThreadState => {
  switch (event.type) {
    case "thread.created":
      return { ...state, exists: true }
    case "message.queued":
      return {
        ...state,
        queue: MessageQueue.enqueue(state.queue, { messageId: event.messageId, text: event.text }),
        messageIds: HashSet.add(state.messageIds, event.messageId)
      }
    case "turn.started":
      return {
        ...state,
        turns: event.ordinal,
        queue: MessageQueue.remove(state.queue, event.messageId),
        messageIds: HashSet.add(state.messageIds, event.messageId),
        active: {
          turnId: event.turnId,
          ordinal: event.ordinal,
          step: 1,
          stepEffectId: stepEffectId(event.turnId, 1),
          calls: [],
          answered: []
        }
      }
    case "model.responded":
      return state.active === null
        ? state
        : {
            ...state,
            transcriptIds: event.toolCalls.reduce((ids, c) => HashSet.add(ids, c.transcriptId), state.transcriptIds),
            active: { ...state.active, step: event.step, calls: event.toolCalls, answered: [] }
          }
    case "tool.result": {
      const active = state.active
      if (active === null) return state
      const answered = [...active.answered, event.result.transcriptId]
      const allIn = active.calls.every((c) => answered.includes(c.transcriptId))
      // All results in: the next step begins (its effect was decided with this event).
      return allIn
        ? {
            ...state,
            active: {
              ...active,
              step: active.step + 1,
              stepEffectId: stepEffectId(active.turnId, active.step + 1),
              calls: [],
              answered: []
            }
          }
        : { ...state, active: { ...active, answered } }
    }
    case "turn.completed":
    case "turn.ended":
      return { ...state, active: null }
    case "thread.deleted":
      return { ...state, deleted: true, active: null, queue: MessageQueue.empty }
    case "delegation.withdrawn":
      return { ...state, queue: MessageQueue.remove(state.queue, event.messageId) }
    case "approval.requested":
      return {
        ...state,
        waits: Waits.opened(state.waits, waitNameOf(event.transcriptId), {
          status: "open",
          deadline: event.deadline,
          token: event.token
        }),
        approvals: HashMap.set(state.approvals, event.transcriptId, {
          turnId: event.turnId,
          effect: event.effect,
          timeoutMs: event.timeoutMs,
          verdict: null
        })
      }
    case "approval.closed": {
      const record = approvalOf(state, event.transcriptId)
      return {
        ...state,
        waits: Waits.closed(
          state.waits,
          waitNameOf(event.transcriptId),
          event.verdict === "expired" ? "timed-out" : "answered"
        ),
        approvals:
          record === undefined
            ? state.approvals
            : HashMap.set(state.approvals, event.transcriptId, { ...record, effect: null, verdict: event.verdict })
      }
    }
    case "effect.late":
    case "turn.timer-failed":
    case "thread.cleaned":
    case "delegation.accepted":
    case "delegate.awaiting":
    case "delegate.closed":
      return state
  }
}
