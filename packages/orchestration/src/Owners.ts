/**
 * The `owners` table: one heartbeat row per running engine (owner id, node id, last beat, stopped).
 * Reconcile and reclaim read it to tell a dead owner's effects from a live one's: never reclaim
 * from a live owner.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export const heartbeat = (ownerId: string, nodeId: string, now: number) =>
  Effect.flatMap(
    SqlClient,
    (sql) =>
      sql`INSERT INTO owners (owner_id, node_id, started_at, heartbeat_at) VALUES (${ownerId}, ${nodeId}, ${now}, ${now})
      ON CONFLICT (owner_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, stopped_at = NULL`
  )

export const markStopped = (ownerId: string, now: number) =>
  Effect.flatMap(
    SqlClient,
    (sql) => sql`UPDATE owners SET stopped_at = ${now}, heartbeat_at = ${now} WHERE owner_id = ${ownerId}`
  )

/** Owners whose heartbeat is fresher than `aliveAfter` and who have not stopped. */
export const liveOwners = (aliveAfter: number) =>
  Effect.flatMap(
    SqlClient,
    (sql) =>
      sql<{ owner_id: string }>`SELECT owner_id FROM owners WHERE stopped_at IS NULL AND heartbeat_at >= ${aliveAfter}`
  ).pipe(Effect.map((rows) => rows.map((r) => r.owner_id)))

/** An owner's heartbeat row, if it has one: whether it stopped, and when it last beat. */
export const ownerLiveness = (ownerId: string) =>
  Effect.flatMap(
    SqlClient,
    (sql) =>
      sql<{
        heartbeat_at: number
        stopped_at: number | null
      }>`SELECT heartbeat_at, stopped_at FROM owners WHERE owner_id = ${ownerId}`
  ).pipe(
    Effect.map((rows) =>
      rows[0] === undefined
        ? undefined
        : {
            heartbeatAt: Number(rows[0].heartbeat_at),
            stoppedAt: rows[0].stopped_at === null ? null : Number(rows[0].stopped_at)
          }
    )
  )
