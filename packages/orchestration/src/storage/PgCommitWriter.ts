/**
 * The dispatch batch's own writes on PostgreSQL, on the transaction's own node-postgres client. Why
 * a second copy of this SQL (the table modules hold the generic one): through @effect/sql-pg every
 * statement is sent unnamed, so PostgreSQL parses and plans it again each time, and each costs
 * Effect's per-statement plumbing; here each statement is *named* (prepared once per connection) and
 * a command's events and outbox rows go in one statement each (`unnest` of arrays, whatever their
 * number). Rows, answers and SqlError shapes are the generic path's; the PostgreSQL conformance run
 * exercises this writer with every engine test.
 *
 * Keep the column lists in step with EventLog.ts, Outbox.ts and Receipts.ts.
 */
import { TransactionConnection } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { type Cause, Effect, Exit } from "effect"
import type pg from "pg"
import { recordOf } from "../EventLog.js"
import { insertValues, type ReceiptRow, toReceipt } from "../Receipts.js"
import type { CommitWriter } from "./CommitWriter.js"
import { SAVEPOINT_BEGIN, SAVEPOINT_RELEASE, SAVEPOINT_ROLLBACK } from "./Transactions.js"

const FIND_RECEIPTS = "SELECT * FROM receipts WHERE command_id = ANY($1::text[])"
const INSERT_EVENTS = `INSERT INTO events (event_id, aggregate_type, aggregate_id, version, type, schema_version, payload, command_id, occurred_at)
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::bigint[], $7::text[], $8::text[], $9::bigint[])
  RETURNING sequence, event_id`
const INSERT_OUTBOX = `INSERT INTO outbox (effect_id, command_id, aggregate_type, aggregate_id, kind, payload, lane, status, attempts,
  available_at, created_at, updated_at)
  SELECT e, c, t, a, k, p, l, 'pending', 0, v, n, n
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::bigint[])
    AS r(e, c, t, a, k, p, l, v, n)
  ON CONFLICT (effect_id) DO NOTHING`
const INSERT_RECEIPT = `INSERT INTO receipts (command_id, aggregate_type, aggregate_id, command_type, fingerprint, status, first_sequence,
  last_sequence, effect_ids, rejection, accepted_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`

const failure = (cause: unknown) => new SqlError({ cause, message: "Failed to execute statement" })

/** The node-postgres client of the transaction the processor holds. */
const client = Effect.flatMap(Effect.serviceOption(TransactionConnection), (transaction) => {
  const raw =
    transaction._tag === "Some" ? (transaction.value[0] as unknown as { readonly pg?: pg.PoolClient }).pg : undefined
  return raw === undefined
    ? Effect.dieMessage("PgCommitWriter runs only inside a PostgreSQL write transaction")
    : Effect.succeed(raw)
})

const query = <R extends object>(name: string | undefined, text: string, values: ReadonlyArray<unknown> = []) =>
  Effect.flatMap(client, (c) =>
    Effect.async<ReadonlyArray<R>, SqlError>((resume) => {
      const config =
        name === undefined
          ? { text, values: values as Array<unknown> }
          : { name, text, values: values as Array<unknown> }
      c.query(config, (error: Error | null, result: pg.QueryResult) => {
        if (error) resume(Effect.fail(failure(error)))
        else resume(Effect.succeed(result.rows as unknown as ReadonlyArray<R>))
      })
    })
  )

// Savepoint statements take no parameters: the simple protocol, one round trip each.
const simple = (text: string) => Effect.asVoid(query(undefined, text))

export const pgCommitWriter: CommitWriter = {
  findReceipts: (commandIds) =>
    Effect.map(
      query<ReceiptRow>("engine_find_receipts", FIND_RECEIPTS, [commandIds]),
      (rows) => new Map(rows.map((row) => [row.command_id, toReceipt(row)]))
    ),
  appendEvents: (events) =>
    events.length === 0
      ? Effect.succeed([])
      : Effect.map(
          query<{ sequence: number; event_id: string }>("engine_insert_events", INSERT_EVENTS, [
            events.map((e) => e.eventId),
            events.map((e) => e.aggregateType),
            events.map((e) => e.aggregateId),
            events.map((e) => e.version),
            events.map((e) => e.type),
            events.map((e) => e.schemaVersion),
            events.map((e) => e.payloadJson),
            events.map((e) => e.commandId),
            events.map((e) => e.occurredAt)
          ]),
          (rows) => {
            const sequenceById = new Map(rows.map((r) => [r.event_id, Number(r.sequence)]))
            return events.map((e) => recordOf(e, sequenceById.get(e.eventId)!))
          }
        ),
  insertOutbox: (rows) =>
    rows.length === 0
      ? Effect.void
      : Effect.asVoid(
          query("engine_insert_outbox", INSERT_OUTBOX, [
            rows.map((r) => r.effectId),
            rows.map((r) => r.commandId),
            rows.map((r) => r.aggregateType),
            rows.map((r) => r.aggregateId),
            rows.map((r) => r.kind),
            rows.map((r) => r.payloadJson),
            rows.map((r) => r.lane),
            rows.map((r) => r.availableAt),
            rows.map((r) => r.now)
          ])
        ),
  insertReceipt: (receipt) => Effect.asVoid(query("engine_insert_receipt", INSERT_RECEIPT, insertValues(receipt))),
  // The same rules as Transactions.savepoint.
  savepoint: <A, E, R>(body: Effect.Effect<A, E, R>, isStorageFailure: (cause: Cause.Cause<E>) => boolean) =>
    simple(SAVEPOINT_BEGIN).pipe(
      Effect.zipRight(Effect.exit(body)),
      Effect.flatMap((exit): Effect.Effect<Exit.Exit<A, E>, E | SqlError> => {
        if (Exit.isSuccess(exit)) return Effect.as(simple(SAVEPOINT_RELEASE), exit)
        if (isStorageFailure(exit.cause)) return Effect.failCause(exit.cause)
        return simple(SAVEPOINT_ROLLBACK).pipe(Effect.zipRight(simple(SAVEPOINT_RELEASE)), Effect.as(exit))
      })
    )
}
