/**
 * The stream chunks the store holds after a run, read straight from the stopped server's SQLite
 * file (read-only): the one check the harness makes below the HTTP API, because the API shows a
 * step's chunks only as one reader's stream, and the question is whether the store itself holds
 * any range twice.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { SqliteClient } from "@orchestration/engine"
import { Effect } from "effect"
import { join } from "node:path"
import type { StoredChunk } from "./ThreadStreamFollower.js"

interface Row {
  readonly effect_id: string
  readonly attempt: number
  readonly start_offset: number
  readonly end_offset: number
  readonly channel: string
  readonly text: string
}

export const readStoredChunks = (dataDir: string): Promise<ReadonlyArray<StoredChunk>> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient
      const rows = yield* sql<Row>`SELECT effect_id, attempt, start_offset, end_offset, channel, text
        FROM effect_stream_chunks ORDER BY effect_id, attempt, start_offset`
      return rows.map((r) => ({
        effectId: r.effect_id,
        attempt: Number(r.attempt),
        start: Number(r.start_offset),
        end: Number(r.end_offset),
        channel: r.channel,
        text: r.text
      }))
    }).pipe(Effect.provide(SqliteClient.layer({ filename: join(dataDir, "engine.db"), readonly: true })))
  )
