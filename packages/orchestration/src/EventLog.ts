/**
 * The event log table: append inside the commit transaction, read by sequence or by aggregate.
 * Rows are returned as EventRecords with the stored (encoded) payload; decoding into domain events
 * belongs to the engine, which knows each aggregate's schema.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import * as StoredJson from "./StoredJson.js"
import type { EventRecord } from "./Aggregate.js"
import * as TableColumns from "./storage/TableColumns.js"

interface EventRow {
  readonly sequence: number
  readonly event_id: string
  readonly aggregate_type: string
  readonly aggregate_id: string
  readonly version: number
  readonly type: string
  readonly schema_version: number
  readonly payload: string
  readonly command_id: string
  readonly occurred_at: number
}

/** Every column of `events`, in the migrated schema's order (test/table-columns.test.ts holds the two together). */
export const columns = [
  "sequence",
  "event_id",
  "aggregate_type",
  "aggregate_id",
  "version",
  "type",
  "schema_version",
  "payload",
  "command_id",
  "occurred_at"
] as const satisfies ReadonlyArray<keyof EventRow>

/**
 * Never throws: a stored payload that is not JSON (cut off, edited by hand) is read as `payload: null`
 * with `undecodable` saying why, and decoding the record then fails as any undecodable event does
 * (AggregateStates.decodeEvent): its aggregate is quarantined, not every reader of the log. A throw
 * here stopped boot whenever a dead owner's row belonged to that aggregate, and failed whole batches.
 */
const toRecord = (row: EventRow): EventRecord => {
  const read = StoredJson.read(row.payload, "payload")
  // One object, its keys in one order, on the hot read path (every replay and follower reads here).
  const record: EventRecord = {
    sequence: row.sequence,
    eventId: row.event_id,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    version: row.version,
    type: row.type,
    payload: read.ok ? read.value : null,
    commandId: row.command_id,
    occurredAt: row.occurred_at,
    schemaVersion: row.schema_version
  }
  return read.ok ? record : { ...record, undecodable: read.why }
}

export interface NewEvent {
  readonly eventId: string
  readonly aggregateType: string
  readonly aggregateId: string
  readonly version: number
  readonly type: string
  readonly schemaVersion: number
  /** Canonical JSON of the encoded event. */
  readonly payloadJson: string
  readonly commandId: string
  readonly occurredAt: number
}

/** What appending an event writes; the store assigns `sequence`. */
export const insertShape = TableColumns.insertShape<NewEvent>()("events", {
  event_id: "text",
  aggregate_type: "text",
  aggregate_id: "text",
  version: "int",
  type: "text",
  schema_version: "int",
  payload: { type: "text", encode: (e) => e.payloadJson },
  command_id: "text",
  occurred_at: "int"
})

/** Appends events in order and answers their records with the sequences the store assigned. */
export const append = (
  events: ReadonlyArray<NewEvent>
): Effect.Effect<ReadonlyArray<EventRecord>, SqlError, SqlClient> =>
  Effect.gen(function* () {
    if (events.length === 0) return []
    const sql = yield* SqlClient
    const rows = yield* sql<{ sequence: number; event_id: string }>`INSERT INTO events ${sql
      .insert(events.map((e) => TableColumns.toRecord(insertShape, e)))
      .returning("sequence, event_id")}`
    const sequenceById = new Map(rows.map((r) => [r.event_id, Number(r.sequence)]))
    return events.map((e) => recordOf(e, sequenceById.get(e.eventId)!))
  })

/** The record of an event just appended, with the sequence the store assigned (the commit writers use it too). */
export const recordOf = (e: NewEvent, sequence: number): EventRecord => ({
  sequence,
  eventId: e.eventId,
  aggregateType: e.aggregateType,
  aggregateId: e.aggregateId,
  version: e.version,
  type: e.type,
  payload: JSON.parse(e.payloadJson),
  commandId: e.commandId,
  occurredAt: e.occurredAt,
  schemaVersion: e.schemaVersion
})

export const forAggregate = (aggregateType: string, aggregateId: string) =>
  Effect.flatMap(
    SqlClient,
    (sql) =>
      sql<EventRow>`SELECT * FROM events WHERE aggregate_id = ${aggregateId} AND aggregate_type = ${aggregateType} ORDER BY version`
  ).pipe(Effect.map((rows) => rows.map(toRecord)))

/**
 * The events of several aggregates of one type, in one read (the processor warms its cache with it
 * for a batch: a reconcile page touches hundreds of aggregates, one query each cost more than the
 * replay). Grouped by aggregate id, each in version order.
 */
export const forAggregates = (aggregateType: string, aggregateIds: ReadonlyArray<string>) =>
  Effect.flatMap(
    SqlClient,
    (sql) =>
      sql<EventRow>`SELECT * FROM events WHERE ${sql.in("aggregate_id", aggregateIds)} AND aggregate_type = ${aggregateType}
        ORDER BY aggregate_id, version`
  ).pipe(
    Effect.map((rows) => {
      const byId = new Map<string, Array<EventRecord>>()
      for (const row of rows) {
        const record = toRecord(row)
        const list = byId.get(record.aggregateId)
        if (list === undefined) byId.set(record.aggregateId, [record])
        else list.push(record)
      }
      return byId
    })
  )

export const forCommand = (commandId: string) =>
  Effect.flatMap(
    SqlClient,
    (sql) => sql<EventRow>`SELECT * FROM events WHERE command_id = ${commandId} ORDER BY sequence`
  ).pipe(Effect.map((rows) => rows.map(toRecord)))

export interface ReadOptions {
  readonly after: number
  readonly limit: number
  readonly aggregateId?: string | undefined
  /** With `aggregateId`: that one aggregate's events. */
  readonly aggregateType?: string | undefined
  /** The log's commit horizon (StoreBackend.horizon): a read that is not of one aggregate stops at it. */
  readonly upTo?: number | undefined
}

export const read = (options: ReadOptions) =>
  Effect.flatMap(SqlClient, (sql) =>
    options.aggregateId === undefined
      ? sql<EventRow>`SELECT * FROM events WHERE sequence > ${options.after}${
          options.upTo === undefined ? sql.literal("") : sql` AND sequence <= ${options.upTo}`
        } ORDER BY sequence LIMIT ${options.limit}`
      : sql<EventRow>`SELECT * FROM events WHERE aggregate_id = ${options.aggregateId}${
          options.aggregateType === undefined ? sql.literal("") : sql` AND aggregate_type = ${options.aggregateType}`
        } AND sequence > ${options.after}${
          options.upTo === undefined ? sql.literal("") : sql` AND sequence <= ${options.upTo}`
        } ORDER BY sequence LIMIT ${options.limit}`
  ).pipe(Effect.map((rows) => rows.map(toRecord)))

/** The highest committed sequence, 0 for an empty log. */
export const head = Effect.flatMap(
  SqlClient,
  (sql) => sql<{ head: number | null }>`SELECT MAX(sequence) AS head FROM events`
).pipe(Effect.map((rows) => Number(rows[0]?.head ?? 0)))
