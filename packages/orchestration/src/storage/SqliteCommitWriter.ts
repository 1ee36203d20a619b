/**
 * The dispatch batch's own writes on SQLite, run synchronously on the raw connection inside the
 * transaction the processor holds. Why a second path (CommitWriter's generic one goes through the
 * table modules over any SqlClient): each statement through @effect/sql costs a span, a scope, a
 * connection lookup and a prepared-statement cache lookup in Effect, several times the statement's
 * own ~2–5 µs; the batch writes five per command, so this path cut the engine's CPU per command by a
 * large share (docs/benchmarks.md, "What limits the numbers"). The statements are built once from
 * the table modules' insert shapes (EventLog, Outbox, Receipts own their columns); the rows written
 * and the answers returned are the generic path's (test/commit-paths.test.ts runs both on the same
 * commands), and errors are the same SqlError shapes, so StorageErrors maps them identically.
 */
import { SqlError } from "@effect/sql/SqlError"
import { type Cause, Effect, Exit } from "effect"
import * as EventLog from "../EventLog.js"
import * as Outbox from "../Outbox.js"
import * as Receipts from "../Receipts.js"
import type { CommitWriter } from "./CommitWriter.js"
import type Database from "better-sqlite3"
import type { EventRecord } from "../Aggregate.js"
import type { SqliteConnectionShape } from "./SqliteClient.js"
import { SAVEPOINT_BEGIN, SAVEPOINT_RELEASE, SAVEPOINT_ROLLBACK } from "./Transactions.js"
import * as TableColumns from "./TableColumns.js"

/** One row per statement: `INSERT INTO t (…) VALUES (?, …)`, and the row's values in `?` order. */
export const insertStatement = <Row>(shape: TableColumns.InsertShape<Row>, suffix = "") => {
  const encoders = TableColumns.bound(shape).map((c) => c.encode)
  const sources = TableColumns.sources(shape)
  const placeholders = sources.map((s) => ("literal" in s ? s.literal : "?"))
  // A column that repeats another's value binds it again: `?` is positional.
  const order = sources.flatMap((s) => ("bound" in s ? [encoders[s.bound]!] : []))
  return {
    text: `INSERT INTO ${shape.table} (${TableColumns.names(shape).join(", ")}) VALUES (${placeholders.join(", ")})${TableColumns.conflictClause(shape)}${suffix}`,
    values: (row: Row): Array<TableColumns.Value> => order.map((encode) => encode(row))
  }
}

/**
 * Receipts looked up in lists of this many ids: a batch of settlements (a reconcile page, 512) is a
 * few reads, not one per command; lists of few sizes keep the prepared-statement cache small.
 */
const FIND_CHUNK = 64
const findReceipts = (count: number) =>
  `SELECT * FROM receipts WHERE command_id IN (${Array.from({ length: count }, () => "?").join(", ")})`
const INSERT_EVENT = insertStatement(EventLog.insertShape)
const INSERT_OUTBOX = insertStatement(Outbox.insertShape)
const INSERT_RECEIPT = insertStatement(Receipts.insertShape)

/**
 * Appends one event and answers the sequence the store gave it: the connection's last rowid, since
 * `sequence` is the table's INTEGER PRIMARY KEY (Migrations.ts), and the insert has no conflict
 * clause, so it writes its row or throws. Not `RETURNING sequence` read with `get`: that cost about
 * twice the plain insert per row in better-sqlite3 (docs/benchmarks.md, 2026-12-02, fourth session).
 */
const appendEvent = (statement: Database.Statement, e: EventLog.NewEvent): EventRecord => {
  const { changes, lastInsertRowid } = statement.run(INSERT_EVENT.values(e))
  if (changes !== 1) throw new Error(`an event insert wrote ${changes} rows, not one`)
  return EventLog.recordOf(e, Number(lastInsertRowid))
}

/** A driver error, shaped as the SqlClient would raise it. */
const failure = (cause: unknown) => new SqlError({ cause, message: "Failed to execute statement" })
const run = <A>(f: () => A): Effect.Effect<A, SqlError> => Effect.try({ try: f, catch: failure })

export const sqliteCommitWriter = (conn: SqliteConnectionShape): CommitWriter => ({
  findReceipts: (commandIds) =>
    run(() => {
      const receipts = new Map<string, Receipts.Receipt>()
      for (let start = 0; start < commandIds.length; start += FIND_CHUNK) {
        const chunk = commandIds.slice(start, start + FIND_CHUNK)
        for (const row of conn.prepare(findReceipts(chunk.length)).all(chunk) as Array<Receipts.ReceiptRow>) {
          receipts.set(row.command_id, Receipts.toReceipt(row))
        }
      }
      return receipts
    }),
  appendEvents: (events) =>
    run(() => {
      if (events.length === 0) return []
      const statement = conn.prepare(INSERT_EVENT.text)
      return events.map((e) => appendEvent(statement, e))
    }),
  insertOutbox: (rows) =>
    run(() => {
      if (rows.length === 0) return
      const statement = conn.prepare(INSERT_OUTBOX.text)
      for (const r of rows) statement.run(INSERT_OUTBOX.values(r))
    }),
  insertReceipts: (receipts) =>
    run(() => {
      if (receipts.length === 0) return
      const statement = conn.prepare(INSERT_RECEIPT.text)
      for (const r of receipts) statement.run(INSERT_RECEIPT.values(r))
    }),
  // A deferred run (CommitWriter.writeCommands) in one synchronous loop: each command's events,
  // outbox rows and receipt in turn, as the processor writes a command alone.
  writeCommands: (commands, logHead) =>
    run(() => {
      const events = conn.prepare(INSERT_EVENT.text)
      const outbox = conn.prepare(INSERT_OUTBOX.text)
      const receipts = conn.prepare(INSERT_RECEIPT.text)
      let last = logHead
      return commands.map((c) => {
        const records = c.events.map((e) => appendEvent(events, e))
        for (const r of c.effects) outbox.run(INSERT_OUTBOX.values(r))
        last = records.at(-1)?.sequence ?? last
        receipts.run(
          INSERT_RECEIPT.values({ ...c.receipt, firstSequence: records[0]?.sequence ?? null, lastSequence: last })
        )
        return records
      })
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
