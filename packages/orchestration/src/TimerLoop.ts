/**
 * The timer loop: one scoped fiber that fires due timers (Timers.ts) through the front door and
 * sleeps, on the Effect Clock, exactly until the next due time, or until a commit may have added or
 * moved a timer. No polling period decides lateness: a fire is late only by the claim and dispatch.
 * After downtime the first pass fires every overdue timer, earliest first, each once (the receipt of
 * `timer:…#<generation>` answers a second fire as a duplicate; the row is then marked fired).
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import { Cause, Clock, Duration, Effect, Exit, Option, Queue, type Scope, Stream } from "effect"
import { Engine, type EngineShape } from "./Engine.js"
import { CommandIdConflict, CommandRejected, InvalidCommand } from "./Errors.js"
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

type Verdict =
  | { readonly _tag: "fired" }
  | { readonly _tag: "retry" }
  | { readonly _tag: "failed"; readonly reason: TimerFailures.TimerFailureReason; readonly message: string }

/** A fire's answer decides the row: done (accepted or a stored rejection), unfireable, or try again. */
const verdictOf = (exit: Exit.Exit<unknown, unknown>): Verdict => {
  if (Exit.isSuccess(exit)) return { _tag: "fired" }
  const error = Option.getOrUndefined(Cause.failureOption(exit.cause))
  if (error instanceof CommandRejected) return { _tag: "fired" }
  if (error instanceof InvalidCommand) return { _tag: "failed", reason: "invalid-command", message: error.message }
  if (error instanceof CommandIdConflict)
    return { _tag: "failed", reason: "command-id-conflict", message: error.message }
  return { _tag: "retry" }
}

/**
 * Tells the row's aggregate that it could not fire (TimerFailures.ts); answers whether to try again
 * later. Told means a receipt holds the tell (accepted, rejected by the aggregate, or an earlier try
 * under its id). An aggregate this process does not know cannot be told (a rolling deploy): the
 * row is failed all the same, as it was before tells existed, and a domain re-arms it (Trigger's put).
 */
const tellFailure = (
  engine: EngineShape,
  row: Timers.TimerRow,
  failure: { readonly reason: TimerFailures.TimerFailureReason; readonly message: string }
) =>
  Effect.gen(function* () {
    const command = TimerFailures.commandOf(row, failure)
    const exit = yield* Effect.exit(engine.dispatchWithReceipt(command, { origin: "internal" }))
    const error = Exit.isSuccess(exit) ? undefined : Option.getOrUndefined(Cause.failureOption(exit.cause))
    if (Exit.isSuccess(exit) || error instanceof CommandRejected || error instanceof CommandIdConflict) {
      yield* Effect.logError("timer could not fire; the timer is marked failed and its aggregate told", {
        commandId: Timers.fireId(row),
        reason: failure.reason,
        why: failure.message
      })
      return "told" as const
    }
    if (error instanceof InvalidCommand) {
      yield* Effect.logError("timer could not fire, nor its aggregate be told; the timer is marked failed", {
        commandId: Timers.fireId(row),
        reason: failure.reason,
        why: failure.message,
        tell: error.message
      })
      return "told" as const
    }
    yield* Effect.logWarning("telling a timer's aggregate it could not fire was not taken; trying again", {
      commandId: command.commandId,
      cause: Cause.pretty(exit as never)
    })
    return "retry" as const
  })

/** Fires every due timer; answers whether one must be tried again later (storage or engine unavailable). */
const fireDue = (engine: EngineShape, options: Required<TimerLoopOptions>) =>
  Effect.gen(function* () {
    while (true) {
      const now = yield* Clock.currentTimeMillis
      const due = yield* Timers.claimDue(now, options.leaseMs, options.batch)
      if (due.length === 0) return false
      for (const row of due) {
        const commandId = Timers.fireId(row)
        let verdict: Verdict
        if (row.undecodable !== undefined) {
          // A stored command that is not JSON has nothing to dispatch: failed for good, never claimed again.
          verdict = { _tag: "failed", reason: "unreadable", message: row.undecodable }
        } else {
          const exit = yield* Effect.exit(
            engine.dispatchWithReceipt({ ...row.command, commandId }, { origin: "internal" })
          )
          verdict = verdictOf(exit)
          if (verdict._tag === "retry") {
            yield* Effect.logWarning("timer fire not taken; trying again", {
              commandId,
              cause: Cause.pretty(exit as never)
            })
            return true
          }
        }
        // The row is marked failed only once its aggregate was told: a crash between the two tells it
        // again under the same id (answered from its receipt) when the claim's lease ends.
        if (verdict._tag === "failed" && (yield* tellFailure(engine, row, verdict)) === "retry") return true
        yield* Timers.settle(row, verdict._tag, yield* Clock.currentTimeMillis)
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
      batch: options.batch ?? 32
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
