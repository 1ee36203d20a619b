/**
 * Aggregate state for the processor: an LRU cache of `(state, version)` per aggregate, rebuilt from
 * the log on a miss. The cache only ever holds committed state: the processor writes to it after a
 * commit and drops entries after a failed one. An aggregate whose stored events cannot be replayed is
 * quarantined: its commands fail with AggregateUnavailable while every other aggregate is served.
 */
import { Effect, Either, ParseResult, Schema } from "effect"
import type { AnyAggregate, EventRecord } from "./Aggregate.js"
import { AggregateUnavailable, UndecodableEvent } from "./Errors.js"
import * as EventLog from "./EventLog.js"

export interface AggregateState {
  readonly state: unknown
  readonly version: number
}

export const keyOf = (aggregateType: string, aggregateId: string) => `${aggregateType}\u0000${aggregateId}`

/** Decodes one stored event with its aggregate's schema, upcasting older schema versions first. */
export const decodeEvent = (aggregate: AnyAggregate, record: EventRecord): Either.Either<unknown, UndecodableEvent> => {
  if (record.undecodable !== undefined) return Either.left(undecodable(record, record.undecodable))
  let payload: unknown
  try {
    payload =
      record.schemaVersion === aggregate.eventSchemaVersion
        ? record.payload
        : aggregate.upcast({ type: record.type, payload: record.payload, schemaVersion: record.schemaVersion })
  } catch (error) {
    return Either.left(undecodable(record, `upcast threw: ${String(error)}`))
  }
  return Schema.decodeUnknownEither(aggregate.events)(payload).pipe(
    Either.mapLeft((error) => undecodable(record, ParseResult.TreeFormatter.formatErrorSync(error)))
  )
}

const undecodable = (record: EventRecord, message: string) =>
  new UndecodableEvent({
    sequence: record.sequence,
    aggregateType: record.aggregateType,
    eventType: record.type,
    message: `event ${record.sequence} (${record.type}) of ${record.aggregateType} '${record.aggregateId}' cannot be decoded: ${message}`
  })

/** Aggregate ids per preload query: well under either store's limit on bound parameters. */
const PRELOAD_CHUNK = 500

export const makeAggregateStates = (capacity: number) => {
  const entries = new Map<string, AggregateState>()
  const quarantined = new Map<string, string>()

  const get = (key: string): AggregateState | undefined => {
    const hit = entries.get(key)
    if (hit !== undefined) {
      // Re-insert to mark it most recently used.
      entries.delete(key)
      entries.set(key, hit)
    }
    return hit
  }

  const set = (key: string, value: AggregateState) => {
    entries.delete(key)
    entries.set(key, value)
    if (entries.size > capacity) {
      const oldest = entries.keys().next().value
      if (oldest !== undefined) entries.delete(oldest)
    }
  }

  const unavailable = (aggregate: AnyAggregate, aggregateId: string, message: string) =>
    new AggregateUnavailable({ aggregateType: aggregate.name, aggregateId, message })

  /** Replays an aggregate's records into its state, or quarantines it (and says why). */
  const replay = (
    aggregate: AnyAggregate,
    aggregateId: string,
    records: ReadonlyArray<EventRecord>
  ): Either.Either<AggregateState, AggregateUnavailable> => {
    const key = keyOf(aggregate.name, aggregateId)
    let state = aggregate.initialState
    for (const record of records) {
      const decoded = decodeEvent(aggregate, record)
      if (Either.isLeft(decoded)) {
        quarantined.set(key, decoded.left.message)
        return Either.left(unavailable(aggregate, aggregateId, decoded.left.message))
      }
      try {
        state = aggregate.evolve(state, decoded.right)
      } catch (error) {
        const message = `evolve threw on event ${record.sequence} (${record.type}): ${String(error)}`
        quarantined.set(key, message)
        return Either.left(unavailable(aggregate, aggregateId, message))
      }
    }
    const loaded: AggregateState = { state, version: records.at(-1)?.version ?? 0 }
    set(key, loaded)
    return Either.right(loaded)
  }

  /** Current committed state: the cache, else a replay of the aggregate's events. */
  const load = (aggregate: AnyAggregate, aggregateId: string) =>
    Effect.gen(function* () {
      const key = keyOf(aggregate.name, aggregateId)
      const reason = quarantined.get(key)
      if (reason !== undefined) return yield* unavailable(aggregate, aggregateId, reason)
      const cached = get(key)
      if (cached !== undefined) return cached
      const records = yield* EventLog.forAggregate(aggregate.name, aggregateId)
      return yield* replay(aggregate, aggregateId, records)
    })

  /**
   * Replays, in one read per aggregate type, every one of these aggregates that is neither cached nor
   * quarantined, so a batch touching many cold aggregates costs one query instead of one each. Only
   * for committed state: call it before the batch writes anything.
   */
  const preload = (wanted: ReadonlyArray<{ readonly aggregate: AnyAggregate; readonly aggregateId: string }>) =>
    Effect.gen(function* () {
      const cold = new Map<AnyAggregate, Set<string>>()
      for (const { aggregate, aggregateId } of wanted) {
        const key = keyOf(aggregate.name, aggregateId)
        if (entries.has(key) || quarantined.has(key)) continue
        let ids = cold.get(aggregate)
        if (ids === undefined) cold.set(aggregate, (ids = new Set()))
        ids.add(aggregateId)
      }
      for (const [aggregate, ids] of cold) {
        // Alone, the ordinary load does the same in one query; a batch of one is the common case.
        if (ids.size < 2) continue
        const list = [...ids]
        for (let start = 0; start < list.length; start += PRELOAD_CHUNK) {
          const chunk = list.slice(start, start + PRELOAD_CHUNK)
          const records = yield* EventLog.forAggregates(aggregate.name, chunk)
          for (const aggregateId of chunk) replay(aggregate, aggregateId, records.get(aggregateId) ?? [])
        }
      }
    })

  return {
    load,
    preload,
    /** The committed state when it is cached (and the aggregate is not quarantined), without replaying. */
    cached: (key: string): AggregateState | undefined => (quarantined.has(key) ? undefined : get(key)),
    set,
    drop: (key: string) => entries.delete(key),
    size: () => entries.size,
    quarantinedCount: () => quarantined.size,
    /** Forgets that this aggregate could not be replayed: its next load replays the log again. */
    release: (key: string) => quarantined.delete(key)
  }
}

export type AggregateStates = ReturnType<typeof makeAggregateStates>
