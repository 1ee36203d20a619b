/**
 * What delegate-and-await records: on the awaited (child) thread, which of its turns a waiting thread
 * is owed an answer for; on the waiting (parent) thread, which of its calls wait for a child and until
 * when. Events, state and the fold, with no decision in them (Delegation.ts decides).
 */
import { Aggregate, Waits } from "@orchestration/engine"
import { Schema } from "effect"

/** Who waits for a delegated message's turn: the waiting call, and every thread waiting above it. */
export const AwaitedBy = Schema.Struct({
  threadId: Schema.String,
  turnId: Schema.String,
  /** The waiting call's effect id (`tool:<turnId>:<transcriptId>`): the answer names the call by it. */
  effectId: Schema.String,
  /** The threads waiting, outermost first, ending with `threadId`: a target among them is a cycle. */
  chain: Schema.Array(Schema.String)
})
export type AwaitedBy = typeof AwaitedBy.Type

export const DelegationEvent = [
  /** Child side: this turn's end is answered to `awaitedBy`. */
  Aggregate.event("delegation.accepted", { turnId: Schema.String, awaitedBy: AwaitedBy }),
  /**
   * Child side: an awaited message was withdrawn because its waiting turn ended: out of the queue, or,
   * `early`, before it arrived (its delegate was cut off mid-send), so that it is refused when it comes.
   */
  Aggregate.event("delegation.withdrawn", {
    turnId: Schema.String,
    messageId: Schema.String,
    reason: Schema.String,
    early: Schema.optional(Schema.Boolean)
  }),
  /** Parent side: the call's message was accepted by `threadId`; the call stays open until `deadline`. */
  Aggregate.event("delegate.awaiting", {
    turnId: Schema.String,
    effectId: Schema.String,
    threadId: Schema.String,
    childTurnId: Schema.String,
    deadline: Schema.Number,
    token: Schema.String
  }),
  /** Parent side: the wait closed; the call's one result is the tool.result decided with it. */
  Aggregate.event("delegate.closed", {
    turnId: Schema.String,
    effectId: Schema.String,
    status: Schema.Literal("answered", "timed-out")
  })
] as const
export type DelegationEvent = Schema.Schema.Type<(typeof DelegationEvent)[number]>

export interface AwaitingCall {
  readonly turnId: string
  readonly threadId: string
  readonly childTurnId: string
}

export interface DelegationState {
  /** Child side: turns (queued or running) whose end some waiting call is owed, by turn id. */
  readonly awaitedBy: Readonly<Record<string, AwaitedBy>>
  /** Parent side: the calls of the active turn waiting for a child, by effect id, and their waits. */
  readonly awaiting: Readonly<Record<string, AwaitingCall>>
  readonly waits: Waits.WaitsState
  /**
   * Child side: awaited messages withdrawn before they arrived, refused if they come (the last
   * `withdrawnEarlyKept`; a message comes within a lease of its withdraw, if ever).
   */
  readonly withdrawnEarly: ReadonlyArray<string>
}

export const withdrawnEarlyKept = 64

export const initialDelegation: DelegationState = {
  awaitedBy: {},
  awaiting: {},
  waits: Waits.empty,
  withdrawnEarly: []
}

/** A call's wait is named for its effect id. */
export const waitNameOf = (effectId: string) => `delegate:${effectId}`

/** Folds one thread event into the delegation state; `turnEnded` drops what the ended turn held. */
export const evolveDelegation = (
  state: DelegationState,
  event: { readonly type: string; readonly turnId?: string } & Record<string, unknown>
): DelegationState => {
  switch (event.type) {
    case "delegation.accepted": {
      const e = event as unknown as { turnId: string; awaitedBy: AwaitedBy }
      return { ...state, awaitedBy: { ...state.awaitedBy, [e.turnId]: e.awaitedBy } }
    }
    case "delegation.withdrawn":
      return event.early === true
        ? { ...state, withdrawnEarly: [...state.withdrawnEarly, String(event.messageId)].slice(-withdrawnEarlyKept) }
        : { ...state, awaitedBy: without(state.awaitedBy, event.turnId!) }
    case "delegate.awaiting": {
      const e = event as unknown as Extract<DelegationEvent, { type: "delegate.awaiting" }>
      return {
        ...state,
        awaiting: {
          ...state.awaiting,
          [e.effectId]: { turnId: e.turnId, threadId: e.threadId, childTurnId: e.childTurnId }
        },
        waits: Waits.opened(state.waits, waitNameOf(e.effectId), {
          status: "open",
          deadline: e.deadline,
          token: e.token
        })
      }
    }
    case "delegate.closed": {
      const e = event as unknown as Extract<DelegationEvent, { type: "delegate.closed" }>
      return {
        ...state,
        awaiting: without(state.awaiting, e.effectId),
        waits: Waits.closed(state.waits, waitNameOf(e.effectId), e.status)
      }
    }
    case "turn.completed":
    case "turn.ended":
      // The ended turn owes no answer any more (a reply was decided with its end), and its calls, the
      // only ones that could wait (one turn runs at a time), wait no more: a late timer finds no wait.
      return { ...state, awaitedBy: without(state.awaitedBy, event.turnId!), awaiting: {}, waits: Waits.empty }
    case "thread.deleted":
      return { ...state, awaitedBy: {} }
    default:
      return state
  }
}

const without = <A>(record: Readonly<Record<string, A>>, key: string): Readonly<Record<string, A>> => {
  if (!(key in record)) return record
  const { [key]: _, ...rest } = record
  return rest
}
