/**
 * The writes of one dispatch batch, as the processor needs them: the batch's receipt lookup, then
 * per command a savepoint, events, outbox rows and the receipt. Three writers, one set of columns:
 * each table module (EventLog, Outbox, Receipts) owns its insert shape, and every writer builds its
 * statements from it. The generic writer goes through the table modules over any SqlClient (a stock
 * `@effect/sql` SQLite client, for one); the SQLite store offers a faster one over its raw connection
 * (SqliteCommitWriter.ts), PostgreSQL one with named statements and `unnest` inserts
 * (PgCommitWriter.ts). All run inside the transaction the processor holds and produce the same rows
 * and answers: the generic writer is the reference each store's own writer is compared against
 * (test/commit-writers.test.ts on both stores; test/commit-paths.test.ts through the engine on SQLite).
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { type Cause, Effect, type Exit, Option } from "effect"
import type { EventRecord } from "../Aggregate.js"
import * as EventLog from "../EventLog.js"
import * as Outbox from "../Outbox.js"
import * as Receipts from "../Receipts.js"
import { SqliteConnection } from "./SqliteClient.js"
import { pgCommitWriter } from "./PgCommitWriter.js"
import { sqliteCommitWriter } from "./SqliteCommitWriter.js"
import { StoreBackend } from "./StoreBackend.js"
import { savepoint } from "./Transactions.js"

/** One command's rows for CommitWriter.writeCommands: an accepted command's, or a rejection's receipt alone. */
export interface CommandRows {
  readonly events: ReadonlyArray<EventLog.NewEvent>
  readonly effects: ReadonlyArray<Outbox.NewOutboxRow>
  readonly receipt: Omit<Receipts.Receipt, "firstSequence" | "lastSequence">
}

export interface CommitWriter {
  readonly findReceipts: (
    commandIds: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyMap<string, Receipts.Receipt>, SqlError, SqlClient>
  /** Appends in order; the records carry the sequences the store assigned. */
  readonly appendEvents: (
    events: ReadonlyArray<EventLog.NewEvent>
  ) => Effect.Effect<ReadonlyArray<EventRecord>, SqlError, SqlClient>
  /** New pending rows; a row whose effect id exists is left as it is. */
  readonly insertOutbox: (rows: ReadonlyArray<Outbox.NewOutboxRow>) => Effect.Effect<void, SqlError, SqlClient>
  /** Receipts in order; a batch's settlements write theirs together (SettlementWrites.ts). */
  readonly insertReceipts: (receipts: ReadonlyArray<Receipts.Receipt>) => Effect.Effect<void, SqlError, SqlClient>
  /**
   * An accepted command's events, outbox rows and receipt at once, where the store can do that in one
   * round trip (PostgreSQL). The receipt's sequences are filled in from the events (`logHead` when
   * there are none); the answer is appendEvents'. Writers without it take the three calls above.
   */
  readonly writeCommand?: (
    events: ReadonlyArray<EventLog.NewEvent>,
    effects: ReadonlyArray<Outbox.NewOutboxRow>,
    receipt: Omit<Receipts.Receipt, "firstSequence" | "lastSequence">,
    logHead: number
  ) => Effect.Effect<ReadonlyArray<EventRecord>, SqlError, SqlClient>
  /**
   * Several commands' events, outbox rows and receipts at once, in order, where the store can do that
   * in one round trip on PostgreSQL (the processor's deferred runs, Processor.ts). A receipt's sequences
   * are its own events' first and last; a command without events gets no first, and as last the
   * newest sequence of the commands before it in the list, else `logHead`: what writeCommand would
   * have written for each in turn. Answers each command's event records.
   */
  readonly writeCommands: (
    commands: ReadonlyArray<CommandRows>,
    logHead: number
  ) => Effect.Effect<ReadonlyArray<ReadonlyArray<EventRecord>>, SqlError, SqlClient>
  /** See Transactions.savepoint: a non-storage failure rolls back to the savepoint and is returned. */
  readonly savepoint: <A, E, R>(
    body: Effect.Effect<A, E, R>,
    isStorageFailure: (cause: Cause.Cause<E>) => boolean
  ) => Effect.Effect<Exit.Exit<A, E>, E | SqlError, R | SqlClient>
}

/** Over any SqlClient, through the table modules (the path PostgreSQL takes). */
export const genericCommitWriter: CommitWriter = {
  findReceipts: Receipts.find,
  appendEvents: EventLog.append,
  insertOutbox: Outbox.insert,
  insertReceipts: (receipts) => Effect.forEach(receipts, Receipts.insert, { discard: true }),
  // Each command in turn, as the processor writes one alone: the reference for the stores' own.
  writeCommands: (commands, logHead) =>
    Effect.suspend(() => {
      let last = logHead
      return Effect.forEach(commands, (c) =>
        Effect.gen(function* () {
          const records = yield* EventLog.append(c.events)
          yield* Outbox.insert(c.effects)
          last = records.at(-1)?.sequence ?? last
          yield* Receipts.insert({ ...c.receipt, firstSequence: records[0]?.sequence ?? null, lastSequence: last })
          return records
        })
      )
    }),
  savepoint
}

/**
 * The SQLite writer when the store offers its raw connection, the PostgreSQL writer (named statements
 * on the transaction's client) on PostgreSQL, else the generic one.
 */
export const forStore: Effect.Effect<CommitWriter> = Effect.flatMap(
  Effect.serviceOption(SqliteConnection),
  Option.match({
    onSome: (conn) => Effect.succeed(sqliteCommitWriter(conn)),
    onNone: () =>
      Effect.map(StoreBackend, (backend) => (backend.dialect === "postgres" ? pgCommitWriter : genericCommitWriter))
  })
)
