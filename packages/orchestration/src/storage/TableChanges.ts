/**
 * A count of the rows this process changed in some tables, kept by temporary triggers on the SQLite
 * store's one connection. A poll that finds the count where it was at its last look knows those tables
 * hold what that look read: the store is locked for this process (SqliteStore.ts), so nothing else
 * writes them, and every path of this process that writes (the SqlClient, the commit writer's raw
 * statements, a migration) goes through the connection the triggers sit on.
 *
 * A change is counted when its statement runs, before its transaction commits; one rolled back stays
 * counted. Both only make a poll look again when it need not: a reader that takes the count before it
 * reads can never miss a change, since a write it did not see either ran after the count was taken or
 * was rolled back. Where the store is shared (PostgreSQL), the raw connection is not ours (a
 * SqlClient the application passed in), or the file is not locked for this process (a bare
 * SqliteClient.layer: no SqliteStoreLock, so another process may write it), there is no count and a
 * poll always reads.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import type Database from "better-sqlite3"
import { Effect, Option } from "effect"
import { SqliteConnection } from "./SqliteClient.js"
import { SqliteStoreLock } from "./SqliteStore.js"
import { StoreBackend } from "./StoreBackend.js"

/** Reads the count of rows changed so far in the watched tables (it only ever grows). */
export type ChangeCount = () => number

const changeFunction = "orchestration_table_changed"

/** Per connection: the count of changed rows by table, bumped by the triggers' function. */
const counts = new WeakMap<Database.Database, Map<string, number>>()

const countsOf = (db: Database.Database): Map<string, number> => {
  const known = counts.get(db)
  if (known !== undefined) return known
  const byTable = new Map<string, number>()
  db.function(changeFunction, { deterministic: false, directOnly: true }, (table: unknown) => {
    byTable.set(String(table), (byTable.get(String(table)) ?? 0) + 1)
    return null
  })
  counts.set(db, byTable)
  return byTable
}

/**
 * Watches `tables` (which must exist: call it after migrations) and answers their change count, or
 * None where changes by others cannot be ruled out. The triggers are created through the SqlClient,
 * under its permit, so they never land inside (and roll back with) another fiber's transaction.
 */
export const watch = (tables: ReadonlyArray<string>): Effect.Effect<Option.Option<ChangeCount>, never, SqlClient> =>
  Effect.gen(function* () {
    const backend = yield* StoreBackend
    const connection = yield* Effect.serviceOption(SqliteConnection)
    const lock = yield* Effect.serviceOption(SqliteStoreLock)
    if (backend.shared || Option.isNone(connection) || Option.isNone(lock)) return Option.none()
    const byTable = countsOf(connection.value.db)
    const sql = yield* SqlClient
    for (const table of tables) {
      for (const operation of ["INSERT", "UPDATE", "DELETE"]) {
        yield* sql.unsafe(
          `CREATE TEMP TRIGGER IF NOT EXISTS orchestration_changed_${table}_${operation.toLowerCase()}
           AFTER ${operation} ON main.${table} BEGIN SELECT ${changeFunction}('${table}'); END`
        )
      }
    }
    const count: ChangeCount = () => {
      let total = 0
      for (const table of tables) total += byTable.get(table) ?? 0
      return total
    }
    return Option.some(count)
  }).pipe(
    Effect.catchAll((error) =>
      // swallow-ok: without the count a poll reads every time, as it would on a shared store
      Effect.logDebug("could not watch table changes; polls read every time", error).pipe(Effect.as(Option.none()))
    )
  )
