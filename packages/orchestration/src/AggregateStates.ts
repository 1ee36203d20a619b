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

  /** Current committed state: the cache, else a replay of the aggregate's events. */
  const load = (aggregate: AnyAggregate, aggregateId: string) =>
    Effect.gen(function* () {
      const key = keyOf(aggregate.name, aggregateId)
      const reason = quarantined.get(key)
      if (reason !== undefined) return yield* Effect.fail(unavailable(aggregate, aggregateId, reason))
      const cached = get(key)
      if (cached !== undefined) return cached
      const records = yield* EventLog.forAggregate(aggregate.name, aggregateId)
      let state = aggregate.initialState
      for (const record of records) {
        const decoded = decodeEvent(aggregate, record)
        if (Either.isLeft(decoded)) {
          quarantined.set(key, decoded.left.message)
          return yield* Effect.fail(unavailable(aggregate, aggregateId, decoded.left.message))
        }
        try {
          state = aggregate.evolve(state, decoded.right)
        } catch (error) {
          const message = `evolve threw on event ${record.sequence} (${record.type}): ${String(error)}`
          quarantined.set(key, message)
          return yield* Effect.fail(unavailable(aggregate, aggregateId, message))
        }
      }
      const loaded: AggregateState = { state, version: records.at(-1)?.version ?? 0 }
      set(key, loaded)
      return loaded
    })

  return {
    load,
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
