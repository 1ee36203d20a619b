/**
 * The hints the engine rings after a commit: `commits` (events were written; the new log head) and
 * `outboxChanges` (outbox rows were added, cancelled or settled). A hint is a wake-up, never data: a
 * reader re-reads the table, and losing a hint delays work, never loses it. Each is a sliding PubSub
 * of one (a slow reader gets the latest hint, not a backlog) that only the engine rings; consumers
 * get a read-only Stream.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, PubSub, type Queue, Schedule, type Scope, Stream } from "effect"

export interface CommitHints {
  /** Rings after a commit that wrote events; `head` is the log head after it. */
  readonly ringCommit: (head: number) => Effect.Effect<boolean>
  /** Rings after a commit that may have changed outbox rows. */
  readonly ringOutbox: Effect.Effect<boolean>
  /**
   * Subscribes now, in the caller's scope, and gives the stream of commit hints rung from then on:
   * a reader that subscribes, then reads the table, then follows the stream misses no commit.
   */
  readonly commits: Effect.Effect<Stream.Stream<number>, never, Scope.Scope>
  /** The same for outbox changes. */
  readonly outboxChanges: Effect.Effect<Stream.Stream<void>, never, Scope.Scope>
  /** Engine-internal: the commit hints as a queue, for a reader that waits between table reads. */
  readonly subscribeCommits: Effect.Effect<Queue.Dequeue<number>, never, Scope.Scope>
  /** Engine-internal: the outbox hints (rung after every accepted command) as a queue. */
  readonly subscribeOutbox: Effect.Effect<Queue.Dequeue<void>, never, Scope.Scope>
}

export const make: Effect.Effect<CommitHints> = Effect.gen(function* () {
  const commits = yield* PubSub.sliding<number>(1)
  const outboxChanges = yield* PubSub.sliding<void>(1)
  return {
    ringCommit: (head) => PubSub.publish(commits, head),
    ringOutbox: PubSub.publish(outboxChanges, undefined),
    commits: Stream.fromPubSub(commits, { scoped: true }),
    outboxChanges: Stream.fromPubSub(outboxChanges, { scoped: true }),
    subscribeCommits: PubSub.subscribe(commits),
    subscribeOutbox: PubSub.subscribe(outboxChanges)
  }
})

/**
 * Other processes' commits (shared store): wakes followers and reactors here as our own commits do.
 * Reactors also poll for liveness, so a failed LISTEN only delays work; it is re-opened. A store
 * without other processes gives an empty stream, which ends at once.
 */
export const forwardForeign = (
  hints: CommitHints,
  head: { readonly value: number },
  foreignCommitHints: Stream.Stream<void, SqlError>
): Effect.Effect<void, SqlError> =>
  foreignCommitHints.pipe(
    Stream.tapError((error) =>
      Effect.logWarning("commit hints from other processes stopped; retrying (reactors still poll)", error)
    ),
    Stream.retry(Schedule.spaced("1 second")),
    Stream.runForEach(() => hints.ringCommit(head.value).pipe(Effect.zipRight(hints.ringOutbox)))
  )
