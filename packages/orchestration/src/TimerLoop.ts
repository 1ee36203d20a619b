/**
 * The timer loop: one scoped fiber that fires due timers (Timers.ts) through the front door and
 * sleeps, on the Effect Clock, exactly until the next due time, or until a commit may have added or
 * moved a timer. No polling period decides lateness: a fire is late only by the claim and dispatch.
 * After downtime the first pass fires every overdue timer, earliest first, each once (the receipt of
 * `timer:…#<generation>` answers a second fire as a duplicate; the row is then marked fired).
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Cause, Clock, Duration, Effect, Exit, Option, Queue, type Scope, Stream } from "effect"
import { Engine, type EngineShape } from "./Engine.js"
import {
  CommandDefect,
  CommandIdConflict,
  CommandRejected,
  EngineUnavailable,
  InvalidCommand,
  StorageFailure
} from "./Errors.js"
import { StoreBackend } from "./storage/StoreBackend.js"
import * as TimerFailures from "./TimerFailures.js"
import * as Timers from "./Timers.js"

export interface TimerLoopOptions {
  /** How long a claim keeps other processes off a due timer (a dead claimer's rows come back after it). */
  readonly leaseMs?: number
  /** Longest sleep without a wake, so a lost cross-process hint delays a fire at most this long. */
  readonly maxSleep?: Duration.DurationInput
  /** Due timers claimed per round trip. */
  readonly batch?: number
  /**
   * Tries a timer gets when its fire fails in its aggregate's own code (a CommandDefect), a lease
   * apart, before it is failed with reason `defect` and its aggregate told. Counted on the row.
   */
  readonly defectTries?: number
}

/**
 * The wake signal: something committed that may have scheduled or moved a timer (the engine's
 * timer-change hint: a batch of ours that wrote timers, or any commit of another process). Subscribed
 * when this runs, so nothing committed after it is missed. Commands that write no timer do not wake
 * the loop: on the PostgreSQL end-to-end bench its due-time read after every commit was 0.13
 * statements an operation (issue 20).
 */
export const commitSignal = (engine: EngineShape): Effect.Effect<Queue.Dequeue<void>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const ring = yield* Queue.sliding<void>(1)
    const changes = yield* engine.timerChanges
    yield* Effect.forkScoped(Stream.runForEachChunk(changes, () => Queue.offer(ring, undefined)))
    return ring
  })

/**
 * What a fire's answer does to its row:
 * - `fired`: done (accepted, or a stored rejection);
 * - `failed`: it can never fire (its command refused for good): failed, once its aggregate is told;
 * - `defect`: deciding it failed in the aggregate's own code (its decider, evolve or a projection
 *   threw: CommandDefect). A counted try: the row is tried again a lease later, `defectTries` times
 *   in all, then failed with reason `defect`. Not failed at the first one, because a throw can depend
 *   on more than the command (a projection's unique row another command holds for a while, a deploy
 *   fixing the bug between tries); not tried forever, because most are the same at every try, and a
 *   timer retried every lease for good leaves its aggregate waiting in silence (a deadline never
 *   passing) and a warning every 30 s.
 * - `retry`: not taken, for a reason that is not the command's: tried again, uncounted (the store
 *   unavailable, the engine not ready: keep trying, a timer must not be lost to an outage). Scope
 *   `engine` when nothing is taken now (the store refused, the engine unavailable, or the dispatch
 *   died), `row` when it concerns this row's aggregate alone (its log cannot be replayed).
 */
export type Verdict =
  | { readonly _tag: "fired" }
  | { readonly _tag: "failed"; readonly reason: TimerFailures.TimerFailureReason; readonly message: string }
  | { readonly _tag: "defect"; readonly message: string }
  | { readonly _tag: "retry"; readonly scope: "engine" | "row" }

/** Pure: the verdict on a fire from its dispatch's exit, matched on the error's tag. */
export const verdictOf = (exit: Exit.Exit<unknown, unknown>): Verdict => {
  if (Exit.isSuccess(exit)) return { _tag: "fired" }
  const error = Option.getOrUndefined(Cause.failureOption(exit.cause))
  if (error instanceof CommandRejected) return { _tag: "fired" }
  if (error instanceof InvalidCommand) return { _tag: "failed", reason: "invalid-command", message: error.message }
  if (error instanceof CommandIdConflict)
    return { _tag: "failed", reason: "command-id-conflict", message: error.message }
  if (error instanceof CommandDefect) return { _tag: "defect", message: error.message }
  const engineWide = error === undefined || error instanceof StorageFailure || error instanceof EngineUnavailable
  return { _tag: "retry", scope: engineWide ? "engine" : "row" }
}

/** What a row's turn in a round asks of the round: go on with the next row, or stop (nothing is taken now). */
type Next = "next" | "stop"

/**
 * Tells the row's aggregate that it could not fire (TimerFailures.ts); answers whether the row may be
 * marked failed now (`told`) or waits to be told again. Told means a receipt holds the tell (accepted,
 * rejected by the aggregate, or an earlier try under its id). An aggregate this process does not know
 * cannot be told (a rolling deploy): the row is failed all the same, as it was before tells existed,
 * and a domain re-arms it (Trigger's put). Nor can one whose `onTimerFailed` throws: trying that again
 * every lease is the endless retry the defect bound ends, so the row is failed and the error logged.
 */
const tellFailure = (
  engine: EngineShape,
  row: Timers.TimerRow,
  failure: { readonly reason: TimerFailures.TimerFailureReason; readonly message: string }
): Effect.Effect<"told" | Next> =>
  Effect.gen(function* () {
    const command = TimerFailures.commandOf(row, failure)
    const exit = yield* Effect.exit(engine.dispatchWithReceipt(command, { origin: "internal" }))
    const error = Exit.isSuccess(exit) ? undefined : Option.getOrUndefined(Cause.failureOption(exit.cause))
    if (Exit.isSuccess(exit) || error instanceof CommandRejected || error instanceof CommandIdConflict) {
      yield* Effect.logError("timer could not fire; the timer is marked failed and its aggregate told", {
        commandId: Timers.fireId(row),
        reason: failure.reason,
        why: command.message
      })
      return "told" as const
    }
    if (error instanceof InvalidCommand || error instanceof CommandDefect) {
      yield* Effect.logError("timer could not fire, nor its aggregate be told; the timer is marked failed", {
        commandId: Timers.fireId(row),
        reason: failure.reason,
        why: command.message,
        tell: error.message
      })
      return "told" as const
    }
    yield* Effect.logWarning("telling a timer's aggregate it could not fire was not taken; trying again", {
      commandId: command.commandId,
      cause: Cause.pretty(exit.cause)
    })
    // Not told yet: the row stays claimed and pending. Only its aggregate's trouble lets the round go on.
    const verdict = verdictOf(exit)
    return verdict._tag === "retry" && verdict.scope === "row" ? "next" : "stop"
  })

/**
 * Fires one claimed row and settles it, or leaves it claimed (its claim's end is when it is tried
 * again). The row is marked failed, with why, only once its aggregate was told: a crash between the two
 * (or a refused mark) tells it again under the same id (answered from its receipt) when the claim's
 * lease ends, and never fires it, because why it cannot fire was recorded on the row before the tell.
 */
const fireOne = (
  engine: EngineShape,
  row: Timers.TimerRow,
  options: Required<TimerLoopOptions>
): Effect.Effect<Next, SqlError, SqlClient> =>
  Effect.gen(function* () {
    const commandId = Timers.fireId(row)
    let verdict: Exclude<Verdict, { readonly _tag: "retry" }>
    if (row.failure !== undefined) {
      // Found unable to fire on an earlier claim: its aggregate may have been told already. Never fired
      // now (a fix since would fire what the aggregate recorded as never firing): told again and marked.
      verdict = { _tag: "failed", reason: row.failure.reason, message: row.failure.message }
    } else if (row.undecodable !== undefined) {
      // A stored command that is not JSON has nothing to dispatch: failed for good, never claimed again.
      verdict = { _tag: "failed", reason: "unreadable", message: row.undecodable }
    } else {
      const exit = yield* Effect.exit(engine.dispatchWithReceipt({ ...row.command, commandId }, { origin: "internal" }))
      const answer = verdictOf(exit)
      if (answer._tag === "retry") {
        yield* Effect.logWarning("timer fire not taken; trying again", {
          commandId,
          cause: Exit.isFailure(exit) ? Cause.pretty(exit.cause) : undefined
        })
        return answer.scope === "engine" ? "stop" : "next"
      }
      verdict = answer
    }
    if (verdict._tag === "defect") {
      const now = yield* Clock.currentTimeMillis
      const tries = row.attempts + 1
      yield* Timers.recordDefect(row, now, now + options.leaseMs)
      if (tries < options.defectTries) {
        yield* Effect.logWarning("timer fire failed in its aggregate's code; trying again after the lease", {
          commandId,
          tries,
          of: options.defectTries,
          why: TimerFailures.boundedMessage(verdict.message)
        })
        return "next"
      }
      verdict = {
        _tag: "failed",
        reason: "defect",
        message: `failed in its aggregate's code at each of ${tries} tries; the last: ${verdict.message}`
      }
    }
    if (verdict._tag === "fired") {
      yield* Timers.settle(row, { status: "fired" }, yield* Clock.currentTimeMillis)
      return "next"
    }
    // Bounded once, so the row keeps the very message its aggregate is told.
    const failure = { reason: verdict.reason, message: TimerFailures.boundedMessage(verdict.message) }
    // Recorded before the tell: once the aggregate may have been told, a later claim never fires it.
    if (row.failure === undefined) yield* Timers.recordFailure(row, failure, yield* Clock.currentTimeMillis)
    const told = yield* tellFailure(engine, row, failure)
    if (told !== "told") return told
    yield* Timers.settle(row, { status: "failed", ...failure }, yield* Clock.currentTimeMillis)
    return "next"
  })

/**
 * Fires every due timer; answers whether to look again after a pause (the store or the engine took
 * nothing). A row that is not fired now stays claimed and the round goes on with the next: a row that
 * fails every time comes back first in due order at each claim's end, so stopping at it held every
 * later row of its claim back for good. Only when nothing is taken now does the round stop, giving
 * the rows it did not try back at once, rather than holding them for a lease or failing each in turn.
 */
const fireDue = (engine: EngineShape, options: Required<TimerLoopOptions>) =>
  Effect.gen(function* () {
    while (true) {
      const now = yield* Clock.currentTimeMillis
      const due = yield* Timers.claimDue(now, options.leaseMs, options.batch)
      if (due.length === 0) return false
      for (const [index, row] of due.entries()) {
        if ((yield* fireOne(engine, row, options)) === "stop") {
          yield* Timers.release(due.slice(index + 1), yield* Clock.currentTimeMillis)
          return true
        }
      }
    }
  })

/** Runs until its scope closes. Requires the engine to be activated for fires to land (dispatch waits). */
export const run = (options: TimerLoopOptions = {}): Effect.Effect<void, never, Engine | SqlClient | Scope.Scope> =>
  Effect.gen(function* () {
    const engine = yield* Engine
    const resolved: Required<TimerLoopOptions> = {
      leaseMs: options.leaseMs ?? 30_000,
      maxSleep: options.maxSleep ?? "10 seconds",
      batch: options.batch ?? 32,
      defectTries: Math.max(1, options.defectTries ?? 5)
    }
    const maxSleepMs = Duration.toMillis(resolved.maxSleep)
    // Subscribe before the first read, so a commit between the read and the sleep still wakes us.
    const wake = yield* commitSignal(engine)
    const backend = yield* StoreBackend
    // Alone on the store, every claim is a dead process's; on a shared store a claim waits out its lease.
    const start = backend.shared ? Effect.void : Timers.releaseAllClaims
    const round = Effect.gen(function* () {
      yield* Queue.takeAll(wake)
      // A ring says a timer may have moved, not that one is due. Read the next due time first (one
      // indexed SELECT) and claim (an UPDATE, a write on SQLite's one connection, ahead of the
      // reactors' claims) only when a timer is due: claiming on every ring cost the commit → claim
      // pickup about 1 ms at p50 in `pnpm bench --quick`.
      const before = yield* Timers.nextDue()
      const due = before !== undefined && before <= (yield* Clock.currentTimeMillis)
      const retry = due ? yield* fireDue(engine, resolved) : false
      const next = due ? yield* Timers.nextDue() : before
      const now = yield* Clock.currentTimeMillis
      const sleepMs = retry ? 1_000 : Math.min(maxSleepMs, next === undefined ? maxSleepMs : Math.max(0, next - now))
      yield* Effect.raceFirst(Effect.sleep(Duration.millis(sleepMs)), Queue.take(wake))
    })
    const loop = Effect.forever(
      round.pipe(
        Effect.catchAllCause((cause) =>
          // swallow-ok: a failed read or claim of the loop's own is retried after a pause; the rows stay pending.
          Effect.logWarning("timer loop round failed; retrying", cause).pipe(Effect.zipRight(Effect.sleep("1 second")))
        )
      )
    )
    yield* Effect.forkScoped(
      engine.awaitActivation.pipe(
        Effect.zipRight(start),
        Effect.catchAllCause((cause) =>
          // swallow-ok: if the claims cannot be released they come back when their lease ends.
          Effect.logWarning("could not release old timer claims", cause)
        ),
        Effect.zipRight(loop)
      )
    )
  })
