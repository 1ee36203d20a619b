/**
 * The stream chunks the store holds after a run, read straight from the store once the servers are
 * stopped: the stopped server's SQLite file (read-only), or the PostgreSQL database the nodes of a
 * multi-node run shared. The one check the harness makes below the HTTP API, because the API shows a
 * step's chunks only as one reader's stream, and the question is whether the store itself holds any
 * range twice.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { PostgresStore, SqliteClient } from "@orchestration/engine"
import { Effect } from "effect"
import { join } from "node:path"
import type { StoredChunk } from "./ThreadStreamFollower.js"

interface Row {
  readonly effect_id: string
  /** PostgreSQL hands BIGINT columns back as text; SQLite as numbers. */
  readonly attempt: number | string
  readonly start_offset: number | string
  readonly end_offset: number | string
  readonly channel: string
  readonly text: string
}

const storedChunks = Effect.gen(function* () {
  const sql = yield* SqlClient
  const rows = yield* sql<Row>`SELECT effect_id, attempt, start_offset, end_offset, channel, text
    FROM effect_stream_chunks ORDER BY effect_id, attempt, start_offset`
  return rows.map(
    (r): StoredChunk => ({
      effectId: r.effect_id,
      attempt: Number(r.attempt),
      start: Number(r.start_offset),
      end: Number(r.end_offset),
      channel: r.channel,
      text: r.text
    })
  )
})

/** The chunks in a stopped server's data directory (its SQLite file). */
export const readStoredChunks = (dataDir: string): Promise<ReadonlyArray<StoredChunk>> =>
  Effect.runPromise(
    storedChunks.pipe(Effect.provide(SqliteClient.layer({ filename: join(dataDir, "engine.db"), readonly: true })))
  )

/** The chunks in the PostgreSQL database (its `public` schema, the servers' default) at `url`. */
export const readStoredChunksPostgres = (url: string): Promise<ReadonlyArray<StoredChunk>> =>
  Effect.runPromise(
    storedChunks.pipe(Effect.provide(PostgresStore.layer({ url, maxConnections: 1, applicationName: "chaos-judge" })))
  )
