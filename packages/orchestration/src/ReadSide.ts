/**
 * The engine's read side: the log by sequence, the log followed live, stored events decoded with
 * their aggregate's schema, and receipts. Reads never wait for the processor; they see what
 * committed. Following catches up from the table, then waits for a commit hint and reads again, so
 * every event is delivered once, in order, with no gap.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Chunk, Effect, Option, Queue, type Scope, Stream } from "effect"
import type { AnyAggregate, EventRecord } from "./Aggregate.js"
import { decodeEvent } from "./AggregateStates.js"
import type { StorageFailure, UndecodableEvent } from "./Errors.js"
import * as EventLog from "./EventLog.js"
import * as Receipts from "./Receipts.js"
import { toStorageFailure } from "./storage/StorageErrors.js"

export interface ReadEventsOptions {
  readonly after?: number
  readonly limit?: number
  readonly aggregateId?: string
}

export interface FollowOptions {
  readonly after?: number
  readonly aggregateId?: string
}

export interface ReadSide {
  readonly receipt: (commandId: string) => Effect.Effect<Option.Option<Receipts.Receipt>, StorageFailure>
  /** One page of the log after a sequence; `limit` is clamped to 1..10,000 (default 100). */
  readonly readEvents: (options?: ReadEventsOptions) => Effect.Effect<ReadonlyArray<EventRecord>, StorageFailure>
  /** Catches up from the table, then follows new commits: every event once, in order. */
  readonly followEvents: (options?: FollowOptions) => Stream.Stream<EventRecord, StorageFailure>
  /** Decodes a stored event with its aggregate's schema; dies if no aggregate of that name is registered. */
  readonly decode: (record: EventRecord) => Effect.Effect<unknown, UndecodableEvent>
}

export const make = (options: {
  readonly sql: SqlClient
  readonly aggregate: (name: string) => AnyAggregate | undefined
  /** Subscribes to commit hints in the caller's scope. */
  readonly subscribeCommits: Effect.Effect<Queue.Dequeue<number>, never, Scope.Scope>
}): ReadSide => {
  const { sql } = options

  const readEvents = (read: ReadEventsOptions = {}) =>
    EventLog.read({
      after: read.after ?? 0,
      limit: Math.min(Math.max(read.limit ?? 100, 1), 10_000),
      aggregateId: read.aggregateId
    }).pipe(Effect.mapError(toStorageFailure("read events")), Effect.provideService(SqlClient, sql))

  const followEvents = (follow: FollowOptions = {}) =>
    Stream.unwrapScoped(
      Effect.gen(function* () {
        // Subscribe before the first read: a commit between the read and the wait still rings.
        const hints = yield* options.subscribeCommits
        let cursor = follow.after ?? 0
        const next = Effect.gen(function* () {
          while (true) {
            const page = yield* readEvents({
              after: cursor,
              limit: 500,
              ...(follow.aggregateId ? { aggregateId: follow.aggregateId } : {})
            })
            if (page.length > 0) {
              cursor = page[page.length - 1]!.sequence
              return Chunk.fromIterable(page)
            }
            yield* Queue.take(hints)
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

  return { receipt, readEvents, followEvents, decode }
}
