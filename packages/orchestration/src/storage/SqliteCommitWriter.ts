/**
 * The dispatch batch's own writes on SQLite, run synchronously on the raw connection inside the
 * transaction the processor holds. Why a second copy of this SQL (the table modules hold the
 * generic one): each statement through @effect/sql costs a span, a scope, a connection lookup and a
 * prepared-statement cache lookup in Effect, several times the statement's own ~2–5 µs; the batch
 * writes five per command, so this path cut the engine's CPU per command by a large share
 * (docs/benchmarks.md, "What limits the numbers"). The rows written and the answers returned are the
 * same as the generic path's (test/commit-writer.test.ts runs both on the same commands), and errors
 * are the same SqlError shapes, so StorageErrors maps them identically.
 *
 * Keep the column lists in step with EventLog.ts, Outbox.ts and Receipts.ts.
 */
import { SqlError } from "@effect/sql/SqlError"
import { type Cause, Effect, Exit } from "effect"
import { recordOf } from "../EventLog.js"
import type { NewOutboxRow } from "../Outbox.js"
import { insertValues, type Receipt, type ReceiptRow, toReceipt } from "../Receipts.js"
import type { CommitWriter } from "./CommitWriter.js"
import type { SqliteConnectionShape } from "./SqliteClient.js"
import { SAVEPOINT_BEGIN, SAVEPOINT_RELEASE, SAVEPOINT_ROLLBACK } from "./Transactions.js"

const FIND_RECEIPT = "SELECT * FROM receipts WHERE command_id = ?"
const INSERT_EVENT = `INSERT INTO events (event_id, aggregate_type, aggregate_id, version, type, schema_version, payload, command_id, occurred_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING sequence`
const INSERT_OUTBOX = `INSERT INTO outbox (effect_id, command_id, aggregate_type, aggregate_id, kind, payload, lane, status, attempts,
  available_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?) ON CONFLICT (effect_id) DO NOTHING`
const INSERT_RECEIPT = `INSERT INTO receipts (command_id, aggregate_type, aggregate_id, command_type, fingerprint, status, first_sequence,
  last_sequence, effect_ids, rejection, accepted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

/** A driver error, shaped as the SqlClient would raise it. */
const failure = (cause: unknown) => new SqlError({ cause, message: "Failed to execute statement" })
const run = <A>(f: () => A): Effect.Effect<A, SqlError> => Effect.try({ try: f, catch: failure })

export const sqliteCommitWriter = (conn: SqliteConnectionShape): CommitWriter => ({
  findReceipts: (commandIds) =>
    run(() => {
      const statement = conn.prepare(FIND_RECEIPT)
      const receipts = new Map<string, Receipt>()
      for (const commandId of commandIds) {
        const row = statement.get(commandId) as ReceiptRow | undefined
        if (row !== undefined) receipts.set(commandId, toReceipt(row))
      }
      return receipts
    }),
  appendEvents: (events) =>
    run(() => {
      if (events.length === 0) return []
      const statement = conn.prepare(INSERT_EVENT)
      return events.map((e) => {
        const { sequence } = statement.get(
          e.eventId,
          e.aggregateType,
          e.aggregateId,
          e.version,
          e.type,
          e.schemaVersion,
          e.payloadJson,
          e.commandId,
          e.occurredAt
        ) as { sequence: number }
        return recordOf(e, Number(sequence))
      })
    }),
  insertOutbox: (rows: ReadonlyArray<NewOutboxRow>) =>
    run(() => {
      if (rows.length === 0) return
      const statement = conn.prepare(INSERT_OUTBOX)
      for (const r of rows) {
        statement.run(
          r.effectId,
          r.commandId,
          r.aggregateType,
          r.aggregateId,
          r.kind,
          r.payloadJson,
          r.lane,
          r.availableAt,
          r.now,
          r.now
        )
      }
    }),
  insertReceipt: (receipt) =>
    run(() => {
      conn.prepare(INSERT_RECEIPT).run(...insertValues(receipt))
    }),
  // The same rules as Transactions.savepoint, with its statements run inline (fewer Effect steps).
  savepoint: <A, E, R>(body: Effect.Effect<A, E, R>, isStorageFailure: (cause: Cause.Cause<E>) => boolean) =>
    Effect.suspend((): Effect.Effect<Exit.Exit<A, E>, E | SqlError, R> => {
      try {
        conn.prepare(SAVEPOINT_BEGIN).run()
      } catch (cause) {
        return Effect.fail(failure(cause))
      }
      return Effect.flatMap(Effect.exit(body), (exit): Effect.Effect<Exit.Exit<A, E>, E | SqlError> => {
        if (Exit.isFailure(exit) && isStorageFailure(exit.cause)) return Effect.failCause(exit.cause)
        try {
          if (Exit.isFailure(exit)) conn.prepare(SAVEPOINT_ROLLBACK).run()
          conn.prepare(SAVEPOINT_RELEASE).run()
        } catch (cause) {
          return Effect.fail(failure(cause))
        }
        return Effect.succeed(exit)
      })
    })
})
