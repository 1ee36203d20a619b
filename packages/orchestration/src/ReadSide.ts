/**
 * The engine's read side: the log by sequence, the log followed live, stored events decoded with
 * their aggregate's schema, and receipts. Reads never wait for the processor; they see what
 * committed. Following catches up from the table, then waits for a commit hint and reads again, so
 * every event is delivered once, in order, with no gap. A read of the whole log stops at the store's
 * commit horizon (StoreBackend.horizon): on PostgreSQL a row may commit after a later one, and a
 * reader past it would skip it. A read of one aggregate needs none: its versions, so its sequences,
 * commit in order (a writer of version n+1 decided on version n committed; the unique version
 * constraint refuses one that did not).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Chunk, Clock, Duration, Effect, Option, Queue, type Scope, Stream } from "effect"
import type { AnyAggregate, EventRecord } from "./Aggregate.js"
import { decodeEvent } from "./AggregateStates.js"
import type { StorageFailure, UndecodableEvent } from "./Errors.js"
import * as EventLog from "./EventLog.js"
import * as Outbox from "./Outbox.js"
import * as Receipts from "./Receipts.js"
import * as StreamChunks from "./StreamChunks.js"
import type { StreamTailsShape } from "./StreamTails.js"
import * as CommitHorizon from "./storage/CommitHorizon.js"
import { toStorageFailure } from "./storage/StorageErrors.js"
import type { StoreBackendShape } from "./storage/StoreBackend.js"

export interface ReadEventsOptions {
  readonly after?: number
  readonly limit?: number
  readonly aggregateId?: string
  /**
   * With `aggregateId`: one aggregate's events, which commit in its version order, so they are read
   * as soon as they commit. An id alone may name aggregates of several types, whose writers commit
   * in any order: those pages stop at the commit horizon, as the whole log's do.
   */
  readonly aggregateType?: string
}

export interface FollowOptions {
  readonly after?: number
  readonly aggregateId?: string
  /** As ReadEventsOptions.aggregateType. */
  readonly aggregateType?: string
}

export interface ReadSide {
  readonly receipt: (commandId: string) => Effect.Effect<Option.Option<Receipts.Receipt>, StorageFailure>
  /** One page of the log after a sequence; `limit` is clamped to 1..10,000 (default 100). */
  readonly readEvents: (options?: ReadEventsOptions) => Effect.Effect<ReadonlyArray<EventRecord>, StorageFailure>
  /** Catches up from the table, then follows new commits: every event once, in order. */
  readonly followEvents: (options?: FollowOptions) => Stream.Stream<EventRecord, StorageFailure>
  /** Decodes a stored event with its aggregate's schema; dies if no aggregate of that name is registered. */
  readonly decode: (record: EventRecord) => Effect.Effect<unknown, UndecodableEvent>
  /** One page of an effect's stream chunks, all attempts, by attempt then offset. */
  readonly readStreamChunks: (
    effectId: string,
    options?: StreamChunks.ReadChunksOptions
  ) => Effect.Effect<ReadonlyArray<StreamChunks.StreamChunk>, StorageFailure>
  /**
   * Catches up on an effect's chunks, then follows new ones as they commit; ends once the effect is
   * settled and every chunk was delivered (a settled row takes no more chunks).
   */
  readonly followStreamChunks: (
    effectId: string,
    options?: Pick<StreamChunks.ReadChunksOptions, "after">
  ) => Stream.Stream<StreamChunks.StreamChunk, StorageFailure>
}

/** How long a one-shot read of the whole log waits for the horizon to reach the head it saw. */
const READ_BARRIER_MS = 5_000

/** Rows a follower of the log reads at a time. */
const FOLLOW_PAGE = 500

export const make = (options: {
  readonly sql: SqlClient
  readonly aggregate: (name: string) => AnyAggregate | undefined
  /** Subscribes to commit hints in the caller's scope. */
  readonly subscribeCommits: Effect.Effect<Queue.Dequeue<number>, never, Scope.Scope>
  /** Subscribes to the hints rung after every accepted command of one aggregate (a chunk writes no event). */
  readonly subscribeAggregate: (
    aggregateType: string,
    aggregateId: string
  ) => Effect.Effect<Queue.Dequeue<void>, never, Scope.Scope>
  /** The chunks this process committed last, answering reads at a live attempt's end without the table. */
  readonly tails: StreamTailsShape
  readonly horizon: StoreBackendShape["horizon"]
}): ReadSide => {
  const { sql, tails } = options

  /**
   * The horizon once it reaches every row committed before the call (bounded in real time: a
   * transaction left open anywhere in the cluster holds it back, and then the read returns less, never
   * past a row that may still commit). A one-shot read then sees the commits its caller waited for.
   */
  const horizonReachingHead = Effect.gen(function* () {
    const head = yield* EventLog.head
    const deadline = Date.now() + READ_BARRIER_MS
    while (true) {
      const view = yield* options.horizon("events", head)
      if (view.trusted === undefined || view.trusted >= head || Date.now() >= deadline) return view
      yield* CommitHorizon.recheckSoon
    }
  })

  /** A page, and whether rows above the horizon wait for open transactions (look again without a hint). */
  const readPage = (read: ReadEventsOptions, reachHead: boolean) =>
    Effect.gen(function* () {
      // One aggregate's events commit in order: read as they commit. An aggregate id alone is no
      // order (aggregates of two types may share an id, their writers commit in any order), so such
      // a page stops at the horizon like the whole log's: a follower of id `k` skipped a job `k`'s
      // event that committed after an account `k`'s later one (2026-12-05).
      const oneAggregate = read.aggregateId !== undefined && read.aggregateType !== undefined
      const horizon = oneAggregate
        ? undefined
        : reachHead
          ? yield* horizonReachingHead
          : yield* options.horizon("events")
      const page = yield* EventLog.read({
        after: read.after ?? 0,
        limit: Math.min(Math.max(read.limit ?? 100, 1), 10_000),
        aggregateId: read.aggregateId,
        aggregateType: read.aggregateId === undefined ? undefined : read.aggregateType,
        upTo: horizon?.trusted
      })
      return { page, waiting: horizon?.waiting === true }
    }).pipe(Effect.mapError(toStorageFailure("read events")), Effect.provideService(SqlClient, sql))

  const readEvents = (read: ReadEventsOptions = {}) => Effect.map(readPage(read, true), ({ page }) => page)

  const followEvents = (follow: FollowOptions = {}) =>
    Stream.unwrapScoped(
      Effect.gen(function* () {
        // Subscribe before the first read: a commit between the read and the wait still rings.
        const hints = yield* options.subscribeCommits
        let cursor = follow.after ?? 0
        /**
         * The last page was short of its limit and nothing waits above the horizon: it read every row
         * committed before its look (the horizon covers those, StoreBackend.horizon), so only a later
         * commit brings more, and that commit rings. The next read waits for its hint.
         */
        let drained = false
        const next = Effect.gen(function* () {
          while (true) {
            if (drained) {
              drained = false
              yield* Queue.take(hints)
            }
            const { page, waiting } = yield* readPage(
              {
                after: cursor,
                limit: FOLLOW_PAGE,
                ...(follow.aggregateId ? { aggregateId: follow.aggregateId } : {}),
                ...(follow.aggregateId && follow.aggregateType ? { aggregateType: follow.aggregateType } : {})
              },
              false
            )
            if (page.length > 0) {
              cursor = page[page.length - 1]!.sequence
              drained = page.length < FOLLOW_PAGE && !waiting
              return Chunk.fromIterable(page)
            }
            // Rows above the horizon wait for transactions that may end without a hint (a rollback).
            if (waiting) yield* Effect.race(Queue.take(hints), CommitHorizon.recheckSoon)
            else yield* Queue.take(hints)
          }
        })
        return Stream.repeatEffectChunk(next)
      })
    )

  const decode = (record: EventRecord) => {
    const aggregate = options.aggregate(record.aggregateType)
    if (aggregate === undefined) return Effect.dieMessage(`no aggregate named '${record.aggregateType}' is registered`)
    return decodeEvent(aggregate, record)
  }

  const receipt = (commandId: string) =>
    Receipts.findOne(commandId).pipe(
      Effect.map(Option.fromNullable),
      Effect.mapError(toStorageFailure("read receipt")),
      Effect.provideService(SqlClient, sql)
    )

  const readStreamChunks = (effectId: string, read: StreamChunks.ReadChunksOptions = {}) => {
    const tail =
      read.after === undefined ? undefined : tails.read(effectId, read.after, StreamChunks.pageLimit(read.limit))
    return tail !== undefined
      ? Effect.succeed(tail)
      : StreamChunks.read(effectId, read).pipe(
          Effect.mapError(toStorageFailure("read stream chunks")),
          Effect.provideService(SqlClient, sql)
        )
  }

  const settledStatuses: ReadonlyArray<string> = ["succeeded", "failed", "cancelled"]
  const findEffect = (effectId: string) =>
    Outbox.find(effectId).pipe(
      Effect.mapError(toStorageFailure("read effect status")),
      Effect.provideService(SqlClient, sql)
    )
  /**
   * Whether no chunk can come any more (`true`), or until when one may (`stopping`: a cancelled row
   * whose performer still holds its lease flushes what it had as it stops, and the table takes it),
   * or `false`: the effect is running or pending.
   */
  const effectEnded = (effectId: string) =>
    Effect.map(
      Effect.zip(findEffect(effectId), Clock.currentTimeMillis),
      ([row, now]): boolean | { readonly stoppingUntil: number } => {
        if (row === undefined) return true
        if (!settledStatuses.includes(row.status)) return false
        const until = StreamChunks.stoppingUntil(row, now)
        return until === undefined ? true : { stoppingUntil: until }
      }
    )

  const followStreamChunks = (effectId: string, follow: Pick<StreamChunks.ReadChunksOptions, "after"> = {}) =>
    Stream.unwrapScoped(
      Effect.gen(function* () {
        // Chunks and the settlement are commands of the effect's aggregate: its hints are the ones to follow.
        // No row yet or any more: nothing to follow, and the loop below ends after one read.
        const owner = yield* findEffect(effectId)
        const hints =
          owner === undefined
            ? yield* Queue.sliding<void>(1)
            : yield* options.subscribeAggregate(owner.aggregateType, owner.aggregateId)
        let after = follow.after ?? { attempt: 0, end: 0 }
        let done = false
        const next = Effect.gen(function* () {
          while (!done) {
            // The status first: a row seen settled took its last chunk before, so the page below holds it.
            const ended = yield* effectEnded(effectId)
            const page = yield* readStreamChunks(effectId, { after, limit: 500 })
            if (page.length > 0) {
              const last = page[page.length - 1]!
              after = { attempt: last.attempt, end: last.end }
              return Option.some(Chunk.fromIterable(page))
            }
            if (ended === true) done = true
            else if (ended === false) yield* Queue.take(hints)
            else {
              // The performer's "stopped" rings the aggregate; a performer that died never says it,
              // and its lease's end is when no chunk of it can come any more.
              const wait = ended.stoppingUntil - (yield* Clock.currentTimeMillis)
              yield* Effect.raceFirst(Queue.take(hints), Effect.sleep(Duration.millis(Math.max(0, wait))))
            }
          }
          return Option.none()
        })
        return Stream.repeatEffectChunkOption(
          Effect.flatMap(Effect.mapError(next, Option.some), (page) =>
            Option.isSome(page) ? Effect.succeed(page.value) : Effect.fail(Option.none())
          )
        )
      })
    )

  return { receipt, readEvents, followEvents, decode, readStreamChunks, followStreamChunks }
}
