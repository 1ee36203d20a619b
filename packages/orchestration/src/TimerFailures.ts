/**
 * A timer that could not fire is told to the aggregate that scheduled it, as an effect's failure is
 * told through its settlement: otherwise a chain the aggregate keeps going through its timers (a
 * cron's next tick, a deadline) stops in silence, with only a `failed` row and a log line to show.
 * The timer loop sends the engine's internal command `engine.timer-failed` (reserved: clients
 * cannot send it) under an id derived from the timer's generation, so a second tell after a crash is
 * answered from its receipt. The aggregate's optional `onTimerFailed` decides what to record or
 * schedule; without it the command is accepted and changes nothing.
 */
import { Effect, Schema } from "effect"
import { Decision, type AnyAggregate } from "./Aggregate.js"
import { boundedId } from "./CommandId.js"
import { commandDefect } from "./CommandWrite.js"
import type { Decide } from "./Processor.js"
import type * as Receipts from "./Receipts.js"
import type { TimerRow } from "./Timers.js"

/**
 * Why a timer could not fire, as a closed set a domain may match:
 * - `invalid-command`: the engine refused its stored command (an unknown type, a payload this
 *   version does not accept: written by another build);
 * - `command-id-conflict`: its fire id was already used by another command (a row dropped and
 *   scheduled again from generation 1);
 * - `unreadable`: its stored command is not JSON (cut off, edited by hand);
 * - `defect`: deciding it failed in the aggregate's own code (its decider, evolve or a projection
 *   threw: CommandDefect) at each of the tries the timer loop gives it (`defectTries`).
 */
export const TimerFailureReason = Schema.Literal("invalid-command", "command-id-conflict", "unreadable", "defect")
export type TimerFailureReason = typeof TimerFailureReason.Type

export const TIMER_FAILED = "engine.timer-failed"

/** The internal command, addressed to the timer's aggregate by name (as a settlement is). */
export const TimerFailed = Schema.Struct({
  type: Schema.Literal(TIMER_FAILED),
  commandId: Schema.String,
  aggregateType: Schema.String,
  aggregateId: Schema.String,
  timerId: Schema.String,
  generation: Schema.Number,
  /** When it was due, epoch ms. */
  at: Schema.Number,
  /** Its stored command; null when unreadable. */
  command: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  reason: TimerFailureReason,
  message: Schema.String
})
export type TimerFailed = typeof TimerFailed.Type

/** What the owning aggregate is told (its optional `onTimerFailed`). */
export interface TimerFailure {
  readonly timerId: string
  readonly generation: number
  readonly at: number
  readonly command: Readonly<Record<string, unknown>> | null
  readonly reason: TimerFailureReason
  readonly message: string
}

/**
 * The most of a failure's message the tell carries. A defect's message holds whatever the domain's
 * error said (a stack-sized text, a serialized state), and the tell is stored in the aggregate's
 * receipt and, through `onTimerFailed`, in its events: it must stay a line an operator reads.
 */
export const MESSAGE_MAX = 2_000

/** The message as the tell carries it: cut at MESSAGE_MAX characters, with a mark that it was. */
export const boundedMessage = (message: string): string =>
  message.length <= MESSAGE_MAX ? message : `${message.slice(0, MESSAGE_MAX - 1)}…`

/** The id of the tell: one per timer generation, never a fire's (those end in `#<generation>`). */
export const tellId = (row: Pick<TimerRow, "aggregateType" | "aggregateId" | "timerId" | "generation">): string =>
  boundedId("timer:", `${row.aggregateType}:${row.aggregateId}:${row.timerId}#${row.generation}:failed`)

/** The command that tells the row's aggregate why the row could not fire. */
export const commandOf = (
  row: TimerRow,
  failure: { readonly reason: TimerFailureReason; readonly message: string }
): TimerFailed => ({
  type: TIMER_FAILED,
  commandId: tellId(row),
  aggregateType: row.aggregateType,
  aggregateId: row.aggregateId,
  timerId: row.timerId,
  generation: row.generation,
  at: row.dueAt,
  command: row.undecodable === undefined ? row.command : null,
  reason: failure.reason,
  message: boundedMessage(failure.message)
})

/** The decision: the aggregate's `onTimerFailed`, or nothing when it has none. */
export const decideTimerFailure =
  (aggregate: AnyAggregate, identity: Receipts.CommandIdentity, failed: TimerFailed): Decide =>
  (state, ctx) => {
    const onTimerFailed = aggregate.onTimerFailed
    if (onTimerFailed === undefined) return Effect.succeed(Decision.none())
    const failure: TimerFailure = {
      timerId: failed.timerId,
      generation: failed.generation,
      at: failed.at,
      command: failed.command,
      reason: failed.reason,
      message: failed.message
    }
    return Effect.try({
      try: () => onTimerFailed(state, failure, ctx),
      catch: (error) => commandDefect(identity, "decide", error)
    })
  }
