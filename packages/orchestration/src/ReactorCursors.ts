/**
 * The `reactor_cursors` table: where each reactor's claim scan starts. A cursor sits just below the
 * oldest unsettled row of its kinds, so the scan never walks settled history; a row that becomes
 * pending again below a cursor moves it back (moveCursorsBelow), in the transaction that re-pended it.
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
 * all are settled), so the claim scan never walks settled history. Ordered with dispatches: the
 * position is computed from a read taken after every dispatch that could make a row pending again
 * (and move this cursor back, see moveCursorsBelow) committed, so it never writes back a position read
 * before such a dispatch.
 */
export const advanceCursor = (reactor: string, kinds: ReadonlyArray<string>, now: number) =>
  Effect.flatMap(Effect.zip(SqlClient, StoreBackend), ([sql, backend]) =>
    backend.orderedWithDispatch(sql<{ position: number }>`INSERT INTO reactor_cursors (reactor, position, updated_at)
      SELECT ${reactor}, COALESCE(
        (SELECT MIN(sequence) - 1 FROM outbox WHERE ${sql.in("kind", kinds)} AND status IN ('pending', 'running')),
        (SELECT MAX(sequence) FROM outbox),
        0), ${now}
      ON CONFLICT (reactor) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at
      RETURNING position`)
  ).pipe(Effect.map((rows) => Number(rows[0]?.position ?? 0)))

/**
 * Moves every cursor at or above `sequence` to just below it (a row there became pending again). A
 * page passes its lowest such row; no cursor above it, nothing is written.
 */
export const moveCursorsBelow = (sequence: number) =>
  Effect.flatMap(
    SqlClient,
    (sql) => sql`UPDATE reactor_cursors SET position = ${sequence - 1} WHERE position >= ${sequence}`
  ).pipe(Effect.asVoid)
