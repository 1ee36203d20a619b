/**
 * The hints the engine rings after a commit: `commits` (events were written; the new log head),
 * `outboxChanges` (outbox rows were added, cancelled or settled), `timerChanges` (timers were
 * scheduled or cancelled) and `aggregateChanges` (a command
 * of this one aggregate was accepted: its events, its effects' rows or its effects' stream chunks
 * changed). A hint is a wake-up, never data: a reader re-reads the table, and losing a hint delays
 * work, never loses it. Each is a sliding queue of one (a slow reader gets the latest hint, not a
 * backlog) that only the engine rings; consumers get a read-only Stream.
 *
 * Why per aggregate: a stream chunk commits twenty times a second per stream, and it concerns only
 * the readers of its own aggregate (a thread's SSE clients). Ringing every reader and reactor for
 * each of them made every open stream re-read the store on every commit (docs/benchmarks.md).
 *
 * A follower of an aggregate (`followAggregate`) also learns whether the commits that rang it may
 * have written the aggregate's events, or only its effects' stream chunks: a thread's SSE stream then
 * reads only the chunks after a chunk commit, one read per wake-up instead of two. The flag is set
 * before the follower is woken and only ever errs towards "read": it starts set, a commit with events
 * of the aggregate sets it, and so does every foreign commit (another process says nothing of what).
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, PubSub, Queue, type Scope, Stream } from "effect"
import * as LoopRounds from "./LoopRounds.js"
import * as OutboxTouches from "./OutboxTouches.js"

export interface CommitHints {
  /** Rings after a commit that wrote events; `head` is the log head after it. */
  readonly ringCommit: (head: number) => Effect.Effect<boolean>
  /**
   * Rings after a commit that may have changed outbox rows, having recorded in `outboxTouches` which
   * rows it may have moved out of `running` (`undefined`, the default: any row).
   */
  readonly ringOutbox: (touched?: ReadonlyArray<string>) => Effect.Effect<boolean>
  /** What the outbox rings so far may have changed (OutboxTouches.ts): read by performers' cancel watches. */
  readonly outboxTouches: OutboxTouches.OutboxTouches
  /** Rings after a commit that scheduled or cancelled timers. */
  readonly ringTimers: Effect.Effect<boolean>
  /**
   * Subscribes now, in the caller's scope, and gives the stream of commit hints rung from then on:
   * a reader that subscribes, then reads the table, then follows the stream misses no commit.
   */
  readonly commits: Effect.Effect<Stream.Stream<number>, never, Scope.Scope>
  /** The same for outbox changes. */
  readonly outboxChanges: Effect.Effect<Stream.Stream<void>, never, Scope.Scope>
  /** The same for timer changes. */
  readonly timerChanges: Effect.Effect<Stream.Stream<void>, never, Scope.Scope>
  /** Engine-internal: the commit hints as a queue, for a reader that waits between table reads. */
  readonly subscribeCommits: Effect.Effect<Queue.Dequeue<number>, never, Scope.Scope>
  /**
   * Rings the readers of these aggregates (keys from `aggregateKey`); `"all"` rings every one.
   * `withEvents`: the keys whose commits wrote events (default: all of them, the safe answer).
   */
  readonly ringAggregates: (
    keys: Iterable<string> | "all",
    withEvents?: ReadonlySet<string> | "all"
  ) => Effect.Effect<void>
  /** Subscribes now, in the caller's scope, to the hints of one aggregate (as `commits` does). */
  readonly subscribeAggregate: (
    aggregateType: string,
    aggregateId: string
  ) => Effect.Effect<Queue.Dequeue<void>, never, Scope.Scope>
  /** The same, telling also whether events may have been written since the last look (AggregateFollower). */
  readonly followAggregate: (
    aggregateType: string,
    aggregateId: string
  ) => Effect.Effect<AggregateFollower, never, Scope.Scope>
}

/** A subscription to one aggregate's hints. */
export interface AggregateFollower {
  /** Waits for the next hint (at once if one was rung since the last wait). */
  readonly changed: Effect.Effect<void>
  /**
   * Whether a commit since the last call (or since subscribing, for the first) may have written
   * events of the aggregate; false means only its effects' stream chunks or rows changed. Resets.
   */
  readonly takeEventsFlag: () => boolean
}

interface Reader {
  readonly queue: Queue.Queue<void>
  events: boolean
}

/** The key of an aggregate's hints. */
export const aggregateKey = (aggregateType: string, aggregateId: string): string =>
  `${aggregateType}\u0000${aggregateId}`

export const make: Effect.Effect<CommitHints> = Effect.gen(function* () {
  const commits = yield* PubSub.sliding<number>(1)
  const outboxChanges = yield* PubSub.sliding<void>(1)
  const timerChanges = yield* PubSub.sliding<void>(1)
  const touches = OutboxTouches.make()
  /** The readers of each aggregate: a commit rings only the queues under its aggregates' keys. */
  const readers = new Map<string, Set<Reader>>()
  /**
   * Offers one wake-up to every reader queued under these keys (every key for `"all"`), flagging
   * events first. Synchronous: a sliding queue of one never suspends its offerer.
   */
  const ring = (keys: Iterable<string> | "all", withEvents: ReadonlySet<string> | "all" = "all") =>
    Effect.sync(() => {
      for (const key of keys === "all" ? readers.keys() : keys) {
        const events = withEvents === "all" || withEvents.has(key)
        for (const reader of readers.get(key) ?? []) {
          if (events) reader.events = true
          reader.queue.unsafeOffer(undefined)
        }
      }
    })
  const follow = (aggregateType: string, aggregateId: string) =>
    Effect.acquireRelease(
      Effect.map(Queue.sliding<void>(1), (queue) => {
        const key = aggregateKey(aggregateType, aggregateId)
        const reader: Reader = { queue, events: true }
        const set = readers.get(key) ?? new Set()
        set.add(reader)
        readers.set(key, set)
        return { key, reader }
      }),
      ({ key, reader }) =>
        Effect.zipRight(
          Effect.sync(() => {
            const set = readers.get(key)
            set?.delete(reader)
            if (set !== undefined && set.size === 0) readers.delete(key)
          }),
          Queue.shutdown(reader.queue)
        )
    ).pipe(Effect.map(({ reader }) => reader))
  return {
    ringCommit: (head) => PubSub.publish(commits, head),
    ringOutbox: (touched) =>
      Effect.suspend(() => {
        touches.record(touched)
        return PubSub.publish(outboxChanges, undefined)
      }),
    outboxTouches: touches,
    ringTimers: PubSub.publish(timerChanges, undefined),
    commits: Stream.fromPubSub(commits, { scoped: true }),
    outboxChanges: Stream.fromPubSub(outboxChanges, { scoped: true }),
    timerChanges: Stream.fromPubSub(timerChanges, { scoped: true }),
    subscribeCommits: PubSub.subscribe(commits),
    ringAggregates: ring,
    subscribeAggregate: (aggregateType, aggregateId) =>
      Effect.map(follow(aggregateType, aggregateId), (reader) => reader.queue),
    followAggregate: (aggregateType, aggregateId) =>
      Effect.map(follow(aggregateType, aggregateId), (reader) => ({
        changed: Queue.take(reader.queue),
        takeEventsFlag: () => {
          const events = reader.events
          reader.events = false
          return events
        }
      }))
  }
})

/**
 * Other processes' commits (shared store): wakes followers and reactors here as our own commits do.
 * Reactors also poll for liveness, so a failed LISTEN only delays work; it is re-opened a second
 * later. So is one that dies: retrying failures alone let a defect (a bug in the driver or in the
 * stream) end the forwarding for the process's life, and followers here heard of other processes'
 * commits only at their next poll or local commit. A store without other processes gives an empty
 * stream, which ends at once.
 */
export const forwardForeign = (
  hints: CommitHints,
  head: { readonly value: number },
  foreignCommitHints: Stream.Stream<void, SqlError>
): Effect.Effect<void> =>
  Stream.runForEach(foreignCommitHints, () =>
    hints
      .ringCommit(head.value)
      .pipe(
        Effect.zipRight(hints.ringOutbox()),
        Effect.zipRight(hints.ringTimers),
        Effect.zipRight(hints.ringAggregates("all"))
      )
  ).pipe(
    // Every cause (failure or defect) is an error value here, logged, and the stream opened again.
    // Shutdown still ends it: an interrupted fiber runs no recovery handler.
    Effect.sandbox,
    Effect.tapError((cause) =>
      LoopRounds.logFailedRound("commit hints from other processes stopped; retrying (reactors still poll)")(
        cause
      ).pipe(Effect.zipRight(Effect.sleep("1 second")))
    ),
    Effect.eventually
  )
