/**
 * The `reactor_cursors` table: where each reactor's claim scan starts. A cursor sits just below the
 * oldest unsettled row of its kinds, so the scan never walks settled history; a row that becomes
 * pending again below a cursor moves it back (moveCursorsBelow), in the transaction that re-pended it.
 *
 * On a shared store writers are not ordered with each other (issue 20), so two rules keep a cursor
 * from passing a row (test/postgres/commit-horizon.test.ts proves both against the forms that skip):
 * an advance never goes above the outbox's commit horizon (a row below it may still commit), and it
 * takes its cursor's row lock before the read it computes from, while a re-pending transaction locks
 * EVERY cursor row before lowering those above its row. Either the advance holds the lock first and
 * the re-pend lowers what it wrote, or the re-pend does and the advance's read sees its row.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { StoreBackend } from "./storage/StoreBackend.js"

export const cursor = (reactor: string) =>
  Effect.flatMap(
    SqlClient,
    (sql) => sql<{ position: number }>`SELECT position FROM reactor_cursors WHERE reactor = ${reactor}`
  ).pipe(Effect.map((rows) => Number(rows[0]?.position ?? 0)))

/**
 * Moves the cursor to just below the oldest unsettled row of these kinds (or to the newest row when
 * all are settled), never above `upTo` (the outbox's commit horizon; undefined on SQLite). In its
 * own transaction: the cursor's row lock, then the position from a read taken after it.
 *
 * A cursor row that does not exist yet cannot be locked, and a re-pending transaction that already
 * locked every cursor did not lock it: the first advance takes a table lock instead, which waits for
 * every transaction holding a cursor row lock (a re-pend in progress) to end and holds off new ones
 * until it commits, when they lower the new row like any other.
 */
export const advanceCursor = (reactor: string, kinds: ReadonlyArray<string>, now: number, upTo?: number) =>
  Effect.flatMap(Effect.zip(SqlClient, StoreBackend), ([sql, backend]) =>
    backend.inOwnTransaction(
      Effect.gen(function* () {
        const below = upTo === undefined ? sql.literal("") : sql` AND sequence <= ${upTo}`
        if (backend.lockForUpdate !== "") {
          // Looked at without a lock first: a row lock held while waiting for the table lock would
          // deadlock two reactors creating their cursors at once.
          const exists = yield* sql`SELECT 1 FROM reactor_cursors WHERE reactor = ${reactor}`
          if (exists.length === 0) yield* sql`LOCK TABLE reactor_cursors IN EXCLUSIVE MODE`
          else
            yield* sql`SELECT 1 FROM reactor_cursors WHERE reactor = ${reactor} ${sql.literal(backend.lockForUpdate)}`
        }
        return yield* sql<{ position: number }>`INSERT INTO reactor_cursors (reactor, position, updated_at)
          SELECT ${reactor}, COALESCE(
            (SELECT MIN(sequence) - 1 FROM outbox WHERE ${sql.in("kind", kinds)} AND status IN ('pending', 'running')${below}),
            (SELECT MAX(sequence) FROM outbox WHERE 1 = 1${below}),
            0), ${now}
          ON CONFLICT (reactor) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at
          RETURNING position`
      })
    )
  ).pipe(Effect.map((rows) => Number(rows[0]?.position ?? 0)))

/**
 * Moves every cursor at or above `sequence` to just below it (a row there became pending again). A
 * page passes its lowest such row. On a shared store every cursor row is locked first, in one order
 * (so two such transactions do not deadlock), then those above the row are lowered by a read taken
 * after the locks: an advance that held a lock has committed by then, and its position is seen.
 */
export const moveCursorsBelow = (sequence: number) =>
  Effect.flatMap(Effect.zip(SqlClient, StoreBackend), ([sql, backend]) =>
    Effect.gen(function* () {
      if (backend.lockForUpdate !== "") {
        yield* sql`SELECT reactor FROM reactor_cursors ORDER BY reactor ${sql.literal(backend.lockForUpdate)}`
      }
      yield* sql`UPDATE reactor_cursors SET position = ${sequence - 1} WHERE position >= ${sequence}`
    })
  )
