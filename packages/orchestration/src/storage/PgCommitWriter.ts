/**
 * The dispatch batch's own writes on PostgreSQL, on the transaction's own node-postgres client. Why
 * a second path (CommitWriter's generic one goes through the table modules over any SqlClient):
 * through @effect/sql-pg every statement is sent unnamed, so PostgreSQL parses and plans it again
 * each time, and each costs Effect's per-statement plumbing; here each statement is *named*
 * (prepared once per connection) and a command's events and outbox rows go in one statement each
 * (`unnest` of arrays, whatever their number). The statements are built once from the table modules'
 * insert shapes (EventLog, Outbox, Receipts own their columns). Rows, answers and SqlError shapes are
 * the generic path's; the PostgreSQL conformance run exercises this writer with every engine test.
 */
import { TransactionConnection } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { type Cause, Effect, Exit } from "effect"
import type pg from "pg"
import * as EventLog from "../EventLog.js"
import * as Outbox from "../Outbox.js"
import * as Receipts from "../Receipts.js"
import type { CommandRows, CommitWriter } from "./CommitWriter.js"
import * as TableColumns from "./TableColumns.js"
import { SAVEPOINT_BEGIN, SAVEPOINT_RELEASE, SAVEPOINT_ROLLBACK } from "./Transactions.js"

const arrayType = (type: "text" | "int") => (type === "int" ? "bigint[]" : "text[]")

/**
 * Any number of rows in one statement: each bound column is one array parameter, `unnest` turns
 * them back into rows (`INSERT … SELECT c1, …, 'pending', … FROM unnest($1::text[], …) AS r(c1, …)`).
 */
export const unnestStatement = <Row>(shape: TableColumns.InsertShape<Row>, suffix = "", firstParameter = 1) => {
  const bound = TableColumns.bound(shape)
  const selected = TableColumns.sources(shape).map((s) => ("literal" in s ? s.literal : `c${s.bound + 1}`))
  const parameters = bound.map((c, i) => `$${i + firstParameter}::${arrayType(c.type)}`)
  return {
    text:
      `INSERT INTO ${shape.table} (${TableColumns.names(shape).join(", ")}) SELECT ${selected.join(", ")}` +
      ` FROM unnest(${parameters.join(", ")}) AS r(${bound.map((_, i) => `c${i + 1}`).join(", ")})` +
      `${TableColumns.conflictClause(shape)}${suffix}`,
    values: (rows: ReadonlyArray<Row>) => bound.map((c) => rows.map(c.encode))
  }
}

/** One row: `INSERT INTO t (…) VALUES ($1, …)`; a column that repeats another's value reuses its `$n`. */
export const valuesStatement = <Row>(shape: TableColumns.InsertShape<Row>) => {
  const bound = TableColumns.bound(shape)
  const placeholders = TableColumns.sources(shape).map((s) => ("literal" in s ? s.literal : `$${s.bound + 1}`))
  return {
    text: `INSERT INTO ${shape.table} (${TableColumns.names(shape).join(", ")}) VALUES (${placeholders.join(", ")})${TableColumns.conflictClause(shape)}`,
    values: (row: Row) => bound.map((c) => c.encode(row))
  }
}

const FIND_RECEIPTS = "SELECT * FROM receipts WHERE command_id = ANY($1::text[])"
const INSERT_EVENTS = unnestStatement(EventLog.insertShape, " RETURNING sequence, event_id")
const INSERT_OUTBOX = unnestStatement(Outbox.insertShape)
const INSERT_RECEIPT = valuesStatement(Receipts.insertShape)
const INSERT_RECEIPTS = unnestStatement(Receipts.insertShape)

/** The receipt columns the command statement computes from the events it inserts. */
const DERIVED_RECEIPT_COLUMNS = new Set(["first_sequence", "last_sequence"])

/**
 * What the one-command and the run statements share: the events and outbox inserts, then the
 * receipt's bound columns, then the log head, numbered in that order; and the receipt's SELECT list,
 * given how each statement derives the sequences and reads a bound column.
 */
const commandParts = (eventsReturning: string) => {
  const events = unnestStatement(EventLog.insertShape, ` RETURNING ${eventsReturning}`)
  const eventParameters = TableColumns.bound(EventLog.insertShape).length
  const outbox = unnestStatement(Outbox.insertShape, "", eventParameters + 1)
  const outboxParameters = TableColumns.bound(Outbox.insertShape).length
  const receiptBound = TableColumns.bound(Receipts.insertShape).filter((c) => !DERIVED_RECEIPT_COLUMNS.has(c.name))
  const first = eventParameters + outboxParameters + 1
  const head = first + receiptBound.length
  const receiptSelect = (
    derived: { readonly first: string; readonly last: string },
    bound: (index: number, type: "text" | "int") => string
  ) =>
    Receipts.insertShape.columns
      .map((c) => {
        if ("constant" in c) return TableColumns.literal(c.constant)
        if (c.name === "first_sequence") return derived.first
        if (c.name === "last_sequence") return derived.last
        if ("sameAs" in c) throw new Error("receipts has no sameAs column")
        return bound(
          receiptBound.findIndex((b) => b.name === c.name),
          c.type
        )
      })
      .join(", ")
  const receiptColumns = TableColumns.names(Receipts.insertShape).join(", ")
  return { events, outbox, receiptBound, first, head, receiptSelect, receiptColumns }
}

/**
 * A command's events, outbox rows and receipt in ONE statement (data-modifying CTEs): three round
 * trips become one, and every round trip saved is one fewer that the transaction stays open (and
 * holds the readers' commit horizon back). The receipt's first and last sequence come from the events' RETURNING
 * (the last is the given log head when there are none), so it equals what the three statements wrote.
 */
const commandStatement = () => {
  const { events, outbox, receiptBound, first, head, receiptSelect, receiptColumns } =
    commandParts("sequence, event_id")
  const select = receiptSelect(
    { first: "(SELECT MIN(sequence) FROM e)", last: `COALESCE((SELECT MAX(sequence) FROM e), $${head}::bigint)` },
    (index, type) => `$${first + index}::${type === "int" ? "bigint" : "text"}`
  )
  return {
    text:
      `WITH e AS (${events.text}), o AS (${outbox.text}), ` +
      `r AS (INSERT INTO receipts (${receiptColumns}) SELECT ${select}) ` +
      "SELECT sequence, event_id FROM e",
    values: (
      rows: ReadonlyArray<EventLog.NewEvent>,
      effects: ReadonlyArray<Outbox.NewOutboxRow>,
      receipt: Receipts.Receipt,
      logHead: number
    ) => [...events.values(rows), ...outbox.values(effects), ...receiptBound.map((c) => c.encode(receipt)), logHead]
  }
}
const WRITE_COMMAND = commandStatement()

/**
 * Several commands' events, outbox rows and receipts in ONE statement (CommitWriter.writeCommands):
 * a batch of N commands costs one round trip instead of N. The receipts come in as arrays `WITH
 * ORDINALITY` (their order in the batch); each one's first and last sequence are its own events'
 * (joined by command id: a batch never holds one id twice, CommandQueue coalesces them), and a
 * receipt without events takes the newest sequence of the receipts before it, else the log head.
 */
const commandsStatement = () => {
  const { events, outbox, receiptBound, first, head, receiptSelect, receiptColumns } = commandParts(
    "sequence, event_id, command_id"
  )
  const commandColumn = receiptBound.findIndex((c) => c.name === "command_id")
  const select = receiptSelect(
    // The running maximum over the batch's order, as a window: a subquery per receipt over the
    // receipts before it was quadratic (a reconcile page of 2,000 settlements: 0.67 s a statement).
    { first: "s.first", last: `COALESCE(MAX(s.last) OVER (ORDER BY c.ord), $${head}::bigint)` },
    (index) => `c.c${index + 1}`
  )
  const receiptArrays = receiptBound.map((b, i) => `$${first + i}::${arrayType(b.type)}`)
  return {
    text:
      `WITH e AS (${events.text}), o AS (${outbox.text}), ` +
      `c AS (SELECT * FROM unnest(${receiptArrays.join(", ")}) WITH ORDINALITY AS r(${receiptBound.map((_, i) => `c${i + 1}`).join(", ")}, ord)), ` +
      `s AS (SELECT c.ord, MIN(e.sequence) AS first, MAX(e.sequence) AS last FROM c JOIN e ON e.command_id = c.c${commandColumn + 1} GROUP BY c.ord), ` +
      `r AS (INSERT INTO receipts (${receiptColumns}) SELECT ${select} FROM c LEFT JOIN s ON s.ord = c.ord) ` +
      "SELECT sequence, event_id FROM e",
    values: (commands: ReadonlyArray<CommandRows>, logHead: number) => {
      // The derived columns are not bound: the statement computes them.
      const receipts = commands.map((c): Receipts.Receipt => ({ ...c.receipt, firstSequence: null, lastSequence: 0 }))
      return [
        ...events.values(commands.flatMap((c) => c.events)),
        ...outbox.values(commands.flatMap((c) => c.effects)),
        ...receiptBound.map((c) => receipts.map(c.encode)),
        logHead
      ]
    }
  }
}
const WRITE_COMMANDS = commandsStatement()

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
      query<Receipts.ReceiptRow>("engine_find_receipts", FIND_RECEIPTS, [commandIds]),
      (rows) => new Map(rows.map((row) => [row.command_id, Receipts.toReceipt(row)]))
    ),
  appendEvents: (events) =>
    events.length === 0
      ? Effect.succeed([])
      : Effect.map(
          query<{ sequence: number; event_id: string }>(
            "engine_insert_events",
            INSERT_EVENTS.text,
            INSERT_EVENTS.values(events)
          ),
          (rows) => {
            const sequenceById = new Map(rows.map((r) => [r.event_id, Number(r.sequence)]))
            return events.map((e) => EventLog.recordOf(e, sequenceById.get(e.eventId)!))
          }
        ),
  insertOutbox: (rows) =>
    rows.length === 0
      ? Effect.void
      : Effect.asVoid(query("engine_insert_outbox", INSERT_OUTBOX.text, INSERT_OUTBOX.values(rows))),
  // One receipt (a command's own) or many (a batch's settlements, SettlementWrites.ts): one statement.
  insertReceipts: (receipts) =>
    receipts.length === 0
      ? Effect.void
      : receipts.length === 1
        ? Effect.asVoid(query("engine_insert_receipt", INSERT_RECEIPT.text, INSERT_RECEIPT.values(receipts[0]!)))
        : Effect.asVoid(query("engine_insert_receipts", INSERT_RECEIPTS.text, INSERT_RECEIPTS.values(receipts))),
  writeCommand: (events, effects, receipt, logHead) =>
    Effect.map(
      query<{ sequence: number; event_id: string }>(
        "engine_write_command",
        WRITE_COMMAND.text,
        WRITE_COMMAND.values(events, effects, { ...receipt, firstSequence: null, lastSequence: logHead }, logHead)
      ),
      (rows) => {
        const sequenceById = new Map(rows.map((r) => [r.event_id, Number(r.sequence)]))
        return events.map((e) => EventLog.recordOf(e, sequenceById.get(e.eventId)!))
      }
    ),
  writeCommands: (commands, logHead) =>
    Effect.map(
      query<{ sequence: number; event_id: string }>(
        "engine_write_commands",
        WRITE_COMMANDS.text,
        WRITE_COMMANDS.values(commands, logHead)
      ),
      (rows) => {
        const sequenceById = new Map(rows.map((r) => [r.event_id, Number(r.sequence)]))
        return commands.map((c) => c.events.map((e) => EventLog.recordOf(e, sequenceById.get(e.eventId)!)))
      }
    ),
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
