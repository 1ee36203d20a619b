/**
 * A background loop's round (a heartbeat, a retention pass, a cancel check) that fails or dies is
 * logged, and the loop goes on at its next round. Catching failures alone was not enough: a defect
 * (a bug in a read, a driver that throws what it should have returned) ended the loop's fiber, which
 * Effect reports at debug level only, so the process went on without its heartbeat (peers then take
 * a live owner's leases), its pruning or its cancel checks, and said nothing. Only an interruption
 * of the loop's own fiber (the scope closing at shutdown) ends the loop.
 */
import { Cause, Effect, LogLevel, Option } from "effect"

/** Longest cause text logged for a defect: a stack, not a dump of every fiber's. */
const CAUSE_CHARS = 2_000

/**
 * Logs why a round ended: a failure at `failureLevel` (a store that refused: the next round tries
 * again), a defect at error level (a bug) with its cause bounded to 2,000 characters. For loops that
 * wait or back off between rounds themselves (`survive` is the plain case).
 */
export const logFailedRound =
  (message: string, failureLevel: LogLevel.LogLevel = LogLevel.Warning) =>
  (cause: Cause.Cause<unknown>): Effect.Effect<void> => {
    const failure = Cause.failureOption(cause)
    return Option.isSome(failure) && Option.isNone(Cause.dieOption(cause))
      ? Effect.logWithLevel(failureLevel, message, failure.value)
      : Effect.logError(message, Cause.pretty(cause).slice(0, CAUSE_CHARS))
  }

/** The round, with its failures and defects logged (`logFailedRound`) instead of ending the loop. */
export const survive =
  (message: string, failureLevel: LogLevel.LogLevel = LogLevel.Warning) =>
  <A, E, R>(round: Effect.Effect<A, E, R>): Effect.Effect<void, never, R> =>
    // Shutdown still ends the loop: once its own fiber is interrupted, Effect runs no recovery handler.
    // An interrupt-only cause that does reach here came from inside the round (a child fiber it joined
    // was interrupted): a round that failed, like any other.
    Effect.catchAllCause(Effect.asVoid(round), logFailedRound(message, failureLevel))
