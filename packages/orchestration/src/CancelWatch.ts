/**
 * Stop reaches running work. A cancel of a running effect is a committed change of its row (an
 * operator's `effect.cancel`, or a domain decision's `cancel`): status `cancelled`, the lease kept by
 * the performer until it says its handler stopped (EffectOutcomes.performanceMayBeRunning). The
 * performer must not learn of it only at its next lease renewal (a third of the lease, 10 s by
 * default): this watch asks the store about the rows its reactor is performing each time the engine's
 * outbox-change signal rings (every commit of this process, and on PostgreSQL other processes'
 * commits through LISTEN) and at a short targeted poll that covers a lost ring. A row that is no
 * longer running at its attempt under this owner stops its handler, and the stop is acknowledged
 * on the row with what is known: when the performance started and after how long it was stopped.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import { Clock, Duration, Effect, LogLevel, Queue, type Scope, Stream } from "effect"
import * as Alarm from "./Alarm.js"
import * as LoopRounds from "./LoopRounds.js"
import * as Outbox from "./Outbox.js"
import type * as OutboxTouches from "./OutboxTouches.js"
import type { ChangeCount } from "./storage/TableChanges.js"

export interface CancelWatchShape {
  /**
   * Watches one performance while the scope is open: `stop` runs (once) when its row is no longer
   * running at `attempt` under this owner (cancelled, settled or taken over elsewhere).
   */
  readonly watch: (
    effectId: string,
    attempt: number,
    stop: Effect.Effect<unknown>,
    /**
     * The engine's touches mark (OutboxTouches) taken before the transaction that claimed the row: a
     * cancel since then is named by a later commit, so the watch need not read the row to begin with.
     */
    since?: number
  ) => Effect.Effect<void, never, Scope.Scope>
  /**
   * Ends the watch of this performance before its scope closes: its handler has ended, so there is
   * nothing left to stop, and the commit of its own settlement then costs the watch no read.
   */
  readonly unwatch: (effectId: string, attempt: number) => void
}

export interface CancelWatchOptions {
  readonly ownerId: string
  /** Subscribes, in the caller's scope, to the signal that rings after commits that may have changed outbox rows. */
  readonly changes: Effect.Effect<Stream.Stream<void>, never, Scope.Scope>
  /** The targeted poll behind the signal. Default 500 ms: within a second on PostgreSQL even without LISTEN. */
  readonly pollInterval?: Duration.DurationInput
  /**
   * The outbox's change count, where only this process writes the store (storage/TableChanges.ts).
   * With it, a ring or poll that finds the count where it was at the last read, and no performance
   * watched since, reads nothing: the rows are as that read found them. Without it, every check reads.
   */
  readonly outboxChangeCount?: ChangeCount | undefined
  /**
   * What the engine's commits may have changed (OutboxTouches.ts). With it, a ring whose commits named
   * no watched row, with no performance watched since the last read, reads nothing; the poll still
   * reads (it is what finds a change nothing itemized or rang). Without it, every ring reads.
   */
  readonly touches?: OutboxTouches.OutboxTouches | undefined
}

/** Pure: is this row, as read now, still the running performance that is being watched? */
export const stillPerforming = (
  row: { readonly status: string; readonly attempts: number; readonly leaseOwner: string | null } | undefined,
  attempt: number,
  ownerId: string
): boolean => row !== undefined && row.status === "running" && row.attempts === attempt && row.leaseOwner === ownerId

export const make = (options: CancelWatchOptions): Effect.Effect<CancelWatchShape, never, SqlClient | Scope.Scope> =>
  Effect.gen(function* () {
    const context = yield* Effect.context<SqlClient>()
    /**
     * `since`: the engine's touches mark as of which the row is known to be running under us (taken
     * before the claim, or at the last read that found it so); undefined until a read has.
     */
    const watched = new Map<
      string,
      { readonly attempt: number; readonly stop: Effect.Effect<unknown>; since: number | undefined }
    >()
    // Subscribed before the first check: a cancel committed from now on rings it.
    const ring = yield* Queue.sliding<void>(1)
    const changes = yield* options.changes
    yield* Effect.forkScoped(Stream.runForEachChunk(changes, () => Queue.offer(ring, undefined)))
    const pollMs = Duration.toMillis(options.pollInterval ?? "500 millis")
    // Rung when a performance is watched: with nothing watched there is nothing to ask about, so the
    // loop waits for this instead of waking at every ring and every poll for nothing.
    const watching = yield* Queue.sliding<void>(1)

    /** Performances watched so far, and how many of them the last read judged, at which change count. */
    let registered = 0
    let judged = 0
    let judgedAt: number | undefined
    // When the last read began (touches only): the poll still reads once per interval.
    let readAt = yield* Clock.currentTimeMillis
    const isWatched = (effectId: string) => watched.has(effectId)

    /**
     * With the engine's touches, at `now`: whether every watched row is as it was known to be (then
     * each entry's mark moves to the newest one). True when each has a mark, no commit recorded since
     * the oldest of them named any watched row (a row named before its own mark makes this read once
     * more than it must, never less), and the poll is not due. Synchronous on purpose: a performance
     * watched meanwhile would otherwise get a mark newer than its claim's, and a cancel named between
     * the two would wait for the poll.
     */
    const confirmUnchanged = (touches: OutboxTouches.OutboxTouches, now: number): boolean => {
      if (now >= readAt + pollMs) return false
      let oldest = Number.POSITIVE_INFINITY
      for (const entry of watched.values()) {
        if (entry.since === undefined) return false
        oldest = Math.min(oldest, entry.since)
      }
      if (touches.touchedSince(oldest, isWatched)) return false
      const mark = touches.mark()
      for (const entry of watched.values()) entry.since = mark
      return true
    }

    const check = Effect.gen(function* () {
      if (watched.size === 0) return
      // Nothing written since the last read, and everything watched was watched before it: the
      // rows are as it found them. A long performance's polls then cost no read.
      const count = options.outboxChangeCount?.()
      if (count !== undefined && count === judgedAt && judged === registered) return
      const touches = options.touches
      let startedAt = readAt
      let mark: number | undefined
      if (touches !== undefined) {
        // Read before judging: reading the clock may let other fibers run (and watch performances).
        startedAt = yield* Clock.currentTimeMillis
        // Rung by commits that named none of the watched rows (new work, other performances settled).
        if (confirmUnchanged(touches, startedAt)) return
        mark = touches.mark()
      }
      const registeredBefore = registered
      // Judge only the performances watched before the read began: one registered while the read
      // was in flight (a claim that committed meanwhile) is not in what was read, and stopping it on
      // that stale answer would interrupt a live handler whose row then stays running under us.
      const entries = [...watched]
      const rows = yield* Outbox.leaseStates(entries.map(([effectId]) => effectId))
      // Only after a read that answered (a failed one leaves the next check to read again).
      readAt = startedAt
      judgedAt = count
      judged = registeredBefore
      for (const [effectId, entry] of entries) {
        if (watched.get(effectId) !== entry) continue
        entry.since = mark
        if (!stillPerforming(rows.get(effectId), entry.attempt, options.ownerId)) {
          watched.delete(effectId)
          yield* entry.stop
        }
      }
    }).pipe(
      // swallow-ok: only a hint is lost; the next ring or poll asks again, and the lease renewal stays
      // the backstop. A defect is logged as an error and the watch goes on (LoopRounds).
      LoopRounds.survive("could not read the watched rows; asking again at the next ring or poll", LogLevel.Debug),
      Effect.provide(context)
    )

    // The poll rings the same queue as a commit does.
    const poll = yield* Alarm.make(ring)
    // With touches a ring may skip its read, so the poll is due an interval after the last read: set
    // from each wake-up instead, a ring that skipped would push it to almost twice the interval. Once
    // that time has passed (the last read failed), from now: a failing read must not loop at once.
    const nextPoll = (now: number) =>
      options.touches !== undefined && readAt + pollMs > now ? readAt + pollMs : now + pollMs
    const ringOrPoll = Clock.currentTimeMillis.pipe(
      Effect.flatMap((now) => poll.set(nextPoll(now))),
      Effect.zipRight(Queue.take(ring))
    )
    // A ring that came while nothing was watched is kept: it may be a cancel committed just after the
    // watch began, before this loop woke (the first check then only reads once more than it must).
    const untilWatched = Queue.take(watching)
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.suspend(() => (watched.size === 0 ? untilWatched : Effect.void)).pipe(
          Effect.zipRight(ringOrPoll),
          Effect.zipRight(check)
        )
      )
    )

    return {
      watch: (effectId, attempt, stop, since) => {
        const entry = { attempt, stop, since: options.touches === undefined ? undefined : since }
        return Effect.acquireRelease(
          Effect.sync(() => {
            watched.set(effectId, entry)
            registered++
            Queue.unsafeOffer(watching, undefined)
            // Its cancel may have committed (and rung) before now, and that ring may have been taken
            // by a check that read only the others watched then: ask again, not at the next poll
            // (with a claim's mark, the check reads only if a commit since the claim named the row).
            Queue.unsafeOffer(ring, undefined)
          }),
          () =>
            Effect.sync(() => {
              if (watched.get(effectId) === entry) watched.delete(effectId)
            })
        ).pipe(Effect.asVoid)
      },
      unwatch: (effectId, attempt) => {
        if (watched.get(effectId)?.attempt === attempt) watched.delete(effectId)
      }
    }
  })

/** The row's stored error as an object, when it is one. */
const storedError = (error: unknown): { readonly message: string; readonly code?: string } | undefined =>
  typeof error === "object" && error !== null && typeof (error as { message?: unknown }).message === "string"
    ? (error as { message: string; code?: string })
    : undefined

/**
 * Pure: what a cancelled row says once its performer stopped the handler: the cancel's reason,
 * when the performance started, after how long it was stopped, and that it may have partly run.
 */
export const stoppedError = (previous: unknown, startedAt: number, stoppedAt: number) => {
  const before = storedError(previous)
  const reason = before?.message ?? "cancelled"
  const afterMs = Math.max(0, stoppedAt - startedAt)
  return {
    message: `${reason}; it had started at ${new Date(startedAt).toISOString()} and was stopped after ${afterMs} ms, so it may have partly run`,
    code: "stopped-after-start",
    reason: "cancelled" as const
  }
}

/**
 * The owner's word that its handler for this attempt stopped (see Outbox.acknowledgeStopped). With
 * `interruptedSince` (the handler was interrupted, not finished), a row cancelled under it also
 * records what is known about the stopped performance.
 */
export const acknowledgeStopped = (
  row: Outbox.OutboxRow,
  ownerId: string,
  interruptedSince: number | undefined,
  stoppedAt: number
) =>
  Effect.gen(function* () {
    const current = yield* Outbox.find(row.effectId)
    const cancelledUnderUs =
      interruptedSince !== undefined &&
      current !== undefined &&
      current.status === "cancelled" &&
      current.attempts === row.attempts &&
      current.leaseOwner === ownerId
    const error = cancelledUnderUs
      ? JSON.stringify(stoppedError(current.error, interruptedSince, stoppedAt))
      : undefined
    yield* Outbox.acknowledgeStopped(row.effectId, row.attempts, ownerId, error)
  })
