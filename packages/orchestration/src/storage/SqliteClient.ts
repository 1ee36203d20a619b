/**
 * Our SqlClient over one better-sqlite3 connection, in place of @effect/sql-sqlite-node's. It is the
 * same shape (`SqlClient.make` from @effect/sql, one connection behind a one-permit semaphore, the
 * SQLite compiler), so Migrator, `sql.insert/in/returning`, `sql.reserve` and our Transactions work
 * unchanged. What differs, and why:
 *
 * - A prepare that fails is not cached. The upstream client caches the *failed* lookup for ten
 *   minutes, so a statement refused once (a table not created yet, a transient error) kept failing.
 * - The prepared-statement cache is a plain LRU `Map`; the upstream `Cache` (hashing, fibers, TTL
 *   clock reads) cost several percent of a dispatch run (docs/benchmarks.md).
 * - A statement runs on the driver in one Effect step instead of ≈ 60 (see EffectSqlInternals.ts):
 *   projections and settlements run several per command, and the reactors' polls several a second.
 * - A statement outside a transaction holds the connection's permit until it has run. The upstream
 *   client takes the permit only to hand out the connection, so a transaction of another fiber could
 *   begin before the statement ran, and the statement then ran inside it (a write rolled back with it).
 * - Rows are read as arrays and made into objects in JavaScript (RowObjects.ts): twice as fast as
 *   the driver's own object rows, for the same objects.
 * - The raw connection is offered as the `SqliteConnection` service, so the processor's hot path can
 *   run its own statements synchronously inside the transaction it already holds (see
 *   SqliteCommitWriter.ts). Only the SQLite store provides it; another SQLite client goes the generic
 *   way (CommitWriter.ts).
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import Database from "better-sqlite3"
import { Context, Effect, Layer, Scope, Stream } from "effect"
import { withDirectStatements } from "./EffectSqlInternals.js"
import { allRows, forgetColumns } from "./RowObjects.js"

export interface SqliteClientOptions {
  readonly filename: string
  readonly readonly?: boolean
  /** Prepared statements kept (least recently used are finalized first). Default 500. */
  readonly prepareCacheSize?: number
}

export interface SqliteConnectionShape {
  /** The one connection. Use it only while holding the client's permit (inside a transaction). */
  readonly db: Database.Database
  /** A cached prepared statement for `sql`; throws the driver's error if it does not prepare. */
  readonly prepare: (sql: string) => Database.Statement
}

/**
 * The raw SQLite connection behind the SqlClient (this client's layer, and so the SQLite store, offer
 * it). It says nothing of other writers to the file: that is SqliteStore's `SqliteStoreLock`.
 */
export class SqliteConnection extends Context.Tag("orchestration/SqliteConnection")<
  SqliteConnection,
  SqliteConnectionShape
>() {}

/** A least-recently-used cache of prepared statements. Failed prepares throw and are never stored. */
export const makePrepareCache = (db: Database.Database, capacity: number) => {
  const statements = new Map<string, Database.Statement>()
  return (sql: string): Database.Statement => {
    const hit = statements.get(sql)
    if (hit !== undefined) {
      // Re-insert to mark it most recently used.
      statements.delete(sql)
      statements.set(sql, hit)
      return hit
    }
    const statement = db.prepare(sql)
    statements.set(sql, statement)
    if (statements.size > capacity) {
      const oldest = statements.keys().next().value
      if (oldest !== undefined) statements.delete(oldest)
    }
    return statement
  }
}

const isSchemaChange = (sql: string) => /^\s*(create|alter|drop)\b/i.test(sql)

const executeFailure = (cause: unknown) => new SqlError({ cause, message: "Failed to execute statement" })
const prepareFailure = (cause: unknown) => new SqlError({ cause, message: "Failed to prepare statement" })

type Rows = ReadonlyArray<any>

export const make = (options: SqliteClientOptions) =>
  Effect.gen(function* () {
    const db = new Database(options.filename, { readonly: options.readonly ?? false })
    yield* Effect.addFinalizer(() => Effect.sync(() => db.close()))
    return yield* makeOver(db, options.prepareCacheSize)
  })

/** The client over a connection someone else opened (and closes): nothing is set or written on it. */
export const makeOver = (db: Database.Database, prepareCacheSize = 500) =>
  Effect.gen(function* () {
    const prepare = makePrepareCache(db, prepareCacheSize)

    /** One step per statement: prepare (cached), bind, run, all synchronously. */
    const run = (sql: string, params: ReadonlyArray<unknown>, mode: "rows" | "raw" | "values") =>
      Effect.withFiberRuntime<Rows, SqlError>((fiber) => {
        let statement: Database.Statement
        try {
          statement = prepare(sql)
        } catch (cause) {
          return Effect.fail(prepareFailure(cause))
        }
        const safe = Context.get(fiber.currentContext, Client.SafeIntegers)
        try {
          if (safe) statement.safeIntegers(true)
          if (!statement.reader) {
            const result = statement.run(...params)
            // A schema change can change what `SELECT *` answers: its column names are read again.
            if (isSchemaChange(sql)) forgetColumns()
            return Effect.succeed(mode === "raw" ? (result as unknown as Rows) : [])
          }
          if (mode === "values") {
            statement.raw(true)
            try {
              return Effect.succeed(statement.all(...params))
            } finally {
              statement.raw(false)
            }
          }
          return Effect.succeed(allRows(statement, params))
        } catch (cause) {
          return Effect.fail(executeFailure(cause))
        } finally {
          if (safe) statement.safeIntegers(false)
        }
      })

    const connection: Connection = {
      execute: (sql, params, transformRows) =>
        transformRows ? Effect.map(run(sql, params, "rows"), transformRows) : run(sql, params, "rows"),
      executeRaw: (sql, params) => run(sql, params, "raw"),
      executeValues: (sql, params) =>
        run(sql, params, "values") as Effect.Effect<ReadonlyArray<ReadonlyArray<unknown>>, SqlError>,
      // Cached too: BEGIN, COMMIT and ROLLBACK run once per transaction, and preparing them each
      // time cost more than running them. The result is the same as a fresh prepare.
      executeUnprepared: (sql, params, transformRows) =>
        transformRows ? Effect.map(run(sql, params ?? [], "rows"), transformRows) : run(sql, params ?? [], "rows"),
      executeStream: () => Stream.dieMessage("executeStream is not implemented for SQLite; page with LIMIT instead")
    }

    const semaphore = yield* Effect.makeSemaphore(1)
    // The permit is held until the scope closes: for a transaction, until it ends; for one statement
    // through @effect/sql's path, until it has run (that path runs it inside `Effect.scoped`).
    const holdPermit = Effect.uninterruptibleMask((restore) =>
      Effect.as(
        Effect.zipRight(
          restore(semaphore.take(1)),
          Effect.tap(Effect.scope, (scope) => Scope.addFinalizer(scope, semaphore.release(1)))
        ),
        connection
      )
    )
    const client = yield* Client.make({
      acquirer: holdPermit,
      transactionAcquirer: holdPermit,
      compiler: Statement.makeCompilerSqlite(),
      spanAttributes: [["db.system.name", "sqlite"]]
    })
    const withPermit = semaphore.withPermits(1)
    // Plain statements go straight to the driver: compile, then one synchronous step (under the
    // permit when no transaction holds it). Through @effect/sql's own path each costs ≈ 60 Effect
    // steps (a span, a scope, the connection lookup) and 15–20 µs, about ten times the statement
    // itself; projections and settlements run several per command (docs/benchmarks.md), the reactors'
    // polls several a second. The result, the error (SqlError), safe integers and the connection are
    // the same; what is left out is the per-statement span (a transaction's batch has one). How it
    // hooks into @effect/sql lives in EffectSqlInternals.ts, the one module that leans on that
    // package's internals.
    return {
      client: withDirectStatements(client, connection, run, (sql, params, mode) => withPermit(run(sql, params, mode))),
      connection: SqliteConnection.of({ db, prepare })
    }
  })

/** SqlClient and SqliteConnection over one SQLite file (or ":memory:"). Sets no pragmas. */
export const layer = (options: SqliteClientOptions): Layer.Layer<Client.SqlClient | SqliteConnection> =>
  Layer.scopedContext(
    Effect.map(make(options), ({ client, connection }) =>
      Context.make(Client.SqlClient, client).pipe(Context.add(SqliteConnection, connection))
    )
  ).pipe(Layer.provide(Reactivity.layer))

/**
 * A SqlClient over a better-sqlite3 connection the caller opened and closes, with the options it
 * chose (the CLI opens a store with no busy wait, so a running server is told at once).
 */
export const layerOver = (db: Database.Database): Layer.Layer<Client.SqlClient> =>
  Layer.scoped(
    Client.SqlClient,
    Effect.map(makeOver(db), ({ client }) => client)
  ).pipe(Layer.provide(Reactivity.layer))
