/**
 * The engine's own transaction boundary. We do not use `sql.withTransaction` on the write path:
 * it turns a failed COMMIT or ROLLBACK into a defect and, after SQLite has already rolled the whole
 * transaction back (SQLITE_FULL, I/O errors), its ROLLBACK fails and hides the original error. Here
 * every outcome is a typed StorageFailure and the connection is always left outside a transaction.
 */
import { SqlClient, TransactionConnection } from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import { Cause, Effect, Exit, Option } from "effect"
import type { StorageFailure } from "../Errors.js"
import { StoreBackend } from "./StoreBackend.js"
import { toStorageFailure } from "./StorageErrors.js"

/** ROLLBACK that tolerates "no transaction is active": SQLite may have rolled back already. */
const rollbackQuietly = (conn: Connection, statement: string) =>
  // swallow-ok: a failed ROLLBACK only means SQLite already ended the transaction; the original
  // failure is what the caller reports, and the next BEGIN proves the connection is usable.
  conn.executeUnprepared(statement, [], undefined).pipe(Effect.exit, Effect.asVoid)

/**
 * Runs `body` in one write transaction. Body failures and commit failures that come from the store
 * become StorageFailure; other typed failures pass through after the rollback.
 */
export const writeTransaction = <A, E, R>(
  operation: string,
  body: Effect.Effect<A, E, R>,
  options: { readonly begin?: string } = {}
): Effect.Effect<A, Exclude<E, SqlError> | StorageFailure, R | SqlClient> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function* () {
      const sql = yield* SqlClient
      return yield* Effect.scoped(
        Effect.gen(function* () {
          const conn = yield* sql.reserve.pipe(Effect.mapError(toStorageFailure(`${operation}: connect`)))
          yield* conn
            .executeUnprepared(options.begin ?? (yield* StoreBackend).beginWrite, [], undefined)
            .pipe(Effect.mapError(toStorageFailure(`${operation}: begin`)))
          const exit = yield* restore(body).pipe(
            Effect.provideService(TransactionConnection, [conn, 0] as const),
            Effect.exit
          )
          if (Exit.isSuccess(exit)) {
            const committed = yield* conn.executeUnprepared("COMMIT", [], undefined).pipe(Effect.exit)
            if (Exit.isSuccess(committed)) return exit.value
            yield* rollbackQuietly(conn, "ROLLBACK")
            return yield* toStorageFailure(`${operation}: commit`)(Cause.squash(committed.cause))
          }
          yield* rollbackQuietly(conn, "ROLLBACK")
          return yield* Effect.failCause(mapSqlFailures(exit.cause, operation))
        })
      )
    })
  )

const mapSqlFailures = <E>(
  cause: Cause.Cause<E>,
  operation: string
): Cause.Cause<Exclude<E, SqlError> | StorageFailure> =>
  Cause.map(cause, (error) => (error instanceof SqlError ? toStorageFailure(operation)(error) : error)) as Cause.Cause<
    Exclude<E, SqlError> | StorageFailure
  >

// One constant name: savepoints of a batch are sequential, never nested, and a fixed SQL text keeps
// these statements (and the hot INSERTs) in the prepared-statement cache. Unique names per command
// thrashed that cache and cost a quarter of the throughput (docs/benchmarks.md).
const SAVEPOINT = "engine_command"

/**
 * Runs `body` under a savepoint of the current transaction. A non-storage failure or a defect rolls
 * back to the savepoint and is returned as the Exit; a storage failure is re-raised, because after a
 * storage error SQLite may have ended the whole transaction and a savepoint can no longer be trusted.
 * `execute` runs one statement of the savepoint's own (the generic path uses `sql.unsafe`).
 */
export const savepointWith =
  (execute: (sql: SqlClient, statement: string) => Effect.Effect<unknown, SqlError>) =>
  <A, E, R>(
    body: Effect.Effect<A, E, R>,
    isStorageFailure: (cause: Cause.Cause<E>) => boolean
  ): Effect.Effect<Exit.Exit<A, E>, E | SqlError, R | SqlClient> =>
    Effect.flatMap(SqlClient, (sql) =>
      execute(sql, SAVEPOINT_BEGIN).pipe(
        Effect.zipRight(Effect.exit(body)),
        Effect.flatMap((exit): Effect.Effect<Exit.Exit<A, E>, E | SqlError> => {
          if (Exit.isSuccess(exit)) return Effect.as(execute(sql, SAVEPOINT_RELEASE), exit)
          if (isStorageFailure(exit.cause)) return Effect.failCause(exit.cause)
          return execute(sql, SAVEPOINT_ROLLBACK).pipe(
            Effect.zipRight(execute(sql, SAVEPOINT_RELEASE)),
            Effect.as(exit)
          )
        })
      )
    )

export const SAVEPOINT_BEGIN = `SAVEPOINT ${SAVEPOINT}`
export const SAVEPOINT_RELEASE = `RELEASE ${SAVEPOINT}`
export const SAVEPOINT_ROLLBACK = `ROLLBACK TO ${SAVEPOINT}`

export const savepoint = savepointWith((sql, statement) => sql.unsafe(statement))

export const hasSqlError = <E>(cause: Cause.Cause<E>): boolean =>
  Option.isSome(
    Cause.find(cause, (reason) =>
      reason._tag === "Fail" && reason.error instanceof SqlError
        ? Option.some(true)
        : reason._tag === "Die" && reason.defect instanceof SqlError
          ? Option.some(true)
          : Option.none()
    )
  )
