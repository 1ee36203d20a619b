/**
 * What a finished performance means for its row: how a handler says it failed (EffectFailure), the
 * retry budget and its backoff, a payload the handler cannot read (payloadOf), and the pure verdict
 * the reactor settles (verdictFor), given the kind's policy. Reactor.ts performs and settles; this
 * module decides, without a store or a clock.
 */
import { Cause, Duration, Effect, Exit, Option, Schema } from "effect"
import type { EffectError } from "./EffectOutcomes.js"
import type * as Outbox from "./Outbox.js"
import { type KindPolicy, processLossOf, type Verdict } from "./ReactorSettlement.js"
import * as StoredJson from "./StoredJson.js"

export interface RetryPolicy {
  readonly maxAttempts: number
  readonly backoff: "exponential" | "fixed"
  readonly base: Duration.DurationInput
  readonly cap: Duration.DurationInput
}

/**
 * How a handler says an effect failed. `retryable: false` makes the failure final at once.
 * `reason` is `handler` unless the handler failed because a store refused a write it needed
 * (`storage`, with the driver's code): its domain then knows nothing further can be recorded; or
 * because its row's payload is not what its kind writes (`defect`, from `payloadOf`).
 */
export class EffectFailure extends Schema.TaggedError<EffectFailure>()("EffectFailure", {
  message: Schema.String,
  retryable: Schema.Boolean,
  code: Schema.optional(Schema.String),
  reason: Schema.optional(Schema.Literal("handler", "storage", "defect"))
}) {}

/** A row whose stored payload cannot be read is never performed: asking again reads the same stored bytes. */
const notPerformed = (why: string) => ({
  message: `not performed: ${why}`,
  code: "payload-undecodable",
  reason: "defect" as const
})

/**
 * A handler's payload as its kind writes it, decoded with `schema` (the decoder built once). A payload
 * of another shape (written by an older build, edited by hand) fails the effect for good, before the
 * handler acts on fields it lacks, as a payload that is not JSON does (verdictFor); the reason says
 * where and what was expected, never the stored value.
 */
export const payloadOf = <A, I>(schema: Schema.Schema<A, I, never>) => {
  const decode = StoredJson.decoder(schema)
  return (row: Outbox.OutboxRow): Effect.Effect<A, EffectFailure> => {
    const read = decode(row.payload, `${row.kind} payload`)
    return read.ok
      ? Effect.succeed(read.value)
      : Effect.fail(new EffectFailure({ ...notPerformed(read.why), retryable: false }))
  }
}

export const defaultRetry: RetryPolicy = { maxAttempts: 5, backoff: "exponential", base: "1 second", cap: "30 seconds" }

/** Milliseconds to wait before attempt `attempt + 1`. Pure. */
export const backoffMillis = (retry: RetryPolicy, attempt: number): number => {
  const base = Duration.toMillis(retry.base)
  const cap = Duration.toMillis(retry.cap)
  const delay = retry.backoff === "fixed" ? base : base * 2 ** Math.max(0, attempt - 1)
  return Math.min(delay, cap)
}

/** A handler interrupted at its kind's timeout (Reactor.ts `perform`). */
export class TimedOut {
  readonly _tag = "TimedOut"
}

/** Pure: what a finished performance means for the row, given its kind's policy and retry budget. */
export const verdictFor = (
  exit: Exit.Exit<unknown, EffectFailure | TimedOut>,
  row: Outbox.OutboxRow,
  policy: KindPolicy,
  retry: RetryPolicy,
  now: number
): Verdict => {
  // Never performed (perform skips its handler): asking again reads the same stored bytes.
  if (row.undecodable !== undefined) return { type: "effect.fail", error: notPerformed(row.undecodable) }
  if (Exit.isSuccess(exit)) return { type: "effect.succeed", response: exit.value ?? null }
  const failure = Option.getOrUndefined(Cause.failureOption(exit.cause))
  const attemptsLeft = row.attempts < retry.maxAttempts
  const retryAt = now + backoffMillis(retry, row.attempts)
  if (failure instanceof TimedOut) {
    const after = Duration.format(Duration.decode(policy.timeout))
    if (processLossOf(policy.onProcessLoss, row.payload) === "process-bound") {
      return {
        type: "effect.fail",
        error: {
          message: `timed out after ${after}; may or may not have taken effect`,
          code: "timeout",
          reason: "timeout"
        }
      }
    }
    const error: EffectError = { message: `timed out after ${after}`, code: "timeout", reason: "timeout" }
    return attemptsLeft
      ? { type: "effect.fail", error, retryAt }
      : { type: "effect.fail", error: exhausted(error, row) }
  }
  if (failure instanceof EffectFailure) {
    const reason = failure.reason ?? "handler"
    const error: EffectError =
      failure.code === undefined
        ? { message: failure.message, reason }
        : { message: failure.message, code: failure.code, reason }
    if (!failure.retryable) return { type: "effect.fail", error }
    return attemptsLeft
      ? { type: "effect.fail", error, retryAt }
      : { type: "effect.fail", error: exhausted(error, row) }
  }
  // A defect or an unexpected interruption: stored with its text, never retried blindly.
  return {
    type: "effect.fail",
    error: { message: `handler defect: ${Cause.pretty(exit.cause)}`, code: "defect", reason: "defect" }
  }
}

const exhausted = (error: EffectError, row: Outbox.OutboxRow): EffectError => ({
  ...error,
  message: `${error.message} (gave up after ${row.attempts} attempts)`
})
