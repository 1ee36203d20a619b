/**
 * Read-only aggregate queries over the engine's outbox and receipts tables, for /health, /metrics
 * and the dashboard's /v1/outbox/summary. They read the engine's schema directly because the engine
 * offers no such aggregates yet (Outbox.countsByStatus has no kind); keep them in step with the
 * engine's migrations.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { StorageErrors } from "@orchestration/engine"
import { Effect } from "effect"

/** One aggregate read: run the query, decode its rows, and name the read in any storage failure. */
const read = <Row extends object, A>(
  operation: string,
  query: (sql: SqlClient) => Effect.Effect<ReadonlyArray<Row>, SqlError>,
  decode: (rows: ReadonlyArray<Row>) => A
) =>
  Effect.flatMap(SqlClient, query).pipe(Effect.map(decode), Effect.mapError(StorageErrors.toStorageFailure(operation)))

export const rowsByStatusAndKind = read(
  "read outbox counts",
  (sql) =>
    sql<{
      status: string
      kind: string
      n: number
    }>`SELECT status, kind, COUNT(*) AS n FROM outbox GROUP BY status, kind ORDER BY status, kind`,
  (rows) => rows.map((r) => ({ status: r.status, kind: r.kind, count: Number(r.n) }))
)

/** Due rows of these kinds not yet settled, and how long the oldest due pending one has waited. */
export const reactorLag = (kinds: ReadonlyArray<string>, now: number) =>
  read(
    "read reactor lag",
    (sql) =>
      sql<{ lag: number; oldest: number | null }>`SELECT COUNT(*) AS lag,
        MIN(CASE WHEN status = 'pending' THEN available_at END) AS oldest
      FROM outbox WHERE status IN ('pending', 'running') AND available_at <= ${now} AND ${sql.in("kind", kinds)}`,
    ([row]) => ({
      lag: Number(row?.lag ?? 0),
      oldestPendingAgeMs: row?.oldest === null || row?.oldest === undefined ? 0 : Math.max(0, now - Number(row.oldest))
    })
  )

/** Reactors' settlements of dead owners' rows (`reclaim:` ids) made after `since`. */
export const leaseReclaimsSince = (since: number) =>
  read(
    "read lease reclaims",
    (sql) =>
      sql<{
        n: number
      }>`SELECT COUNT(*) AS n FROM receipts WHERE command_id LIKE 'reclaim:%' AND accepted_at >= ${since}`,
    ([row]) => Number(row?.n ?? 0)
  )

/** When the oldest due pending row (any kind) became due, or null when none waits. */
export const oldestDuePendingAt = (now: number) =>
  read(
    "read oldest pending",
    (sql) =>
      sql<{
        oldest: number | null
      }>`SELECT MIN(available_at) AS oldest FROM outbox WHERE status = 'pending' AND available_at <= ${now}`,
    ([row]) => (row?.oldest === null || row?.oldest === undefined ? null : Number(row.oldest))
  )

/** The ids of the newest failed rows, newest first. */
export const newestFailedIds = (limit: number) =>
  read(
    "read failed effects",
    (sql) =>
      sql<{
        effect_id: string
      }>`SELECT effect_id FROM outbox WHERE status = 'failed' ORDER BY sequence DESC LIMIT ${limit}`,
    (rows) => rows.map((r) => r.effect_id)
  )
