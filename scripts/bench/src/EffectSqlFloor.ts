/**
 * The floor again, but through @effect/sql with @effect/sql-sqlite-node's SqliteClient: the same five
 * statements per command, 64 commands per `withTransaction`. It shows what a statement costs through
 * the stock Effect SQL stack; the engine now runs its batch on its own client (storage/SqliteClient.ts,
 * storage/SqliteCommitWriter.ts) to avoid most of that cost.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Layer } from "effect"
import { join } from "node:path"
import { runBench } from "./EngineStack.js"
import { floorSchema } from "./Floor.js"
import { nowMs, type RunResult } from "./Stats.js"

export const runEffectSqlFloor = (dir: string, ops: number, batch: number): Promise<RunResult> =>
  runBench(
    Effect.gen(function* () {
      const context = yield* Layer.build(
        SqliteClient.layer({ filename: join(dir, "floor-effect.db"), disableWAL: true })
      )
      const sql = yield* Effect.provide(SqlClient, context)
      yield* sql.unsafe("PRAGMA locking_mode = EXCLUSIVE")
      yield* sql.unsafe("PRAGMA journal_mode = WAL")
      yield* sql.unsafe("PRAGMA synchronous = FULL")
      for (const statement of floorSchema
        .split(";")
        .map((s) => s.trim())
        .filter((s) => s.length > 0))
        yield* sql.unsafe(statement)
      const versions = new Map<string, number>()
      const command = (i: number) =>
        Effect.gen(function* () {
          const commandId = `cmd-${i}`
          const aggregateId = `c-${i % 16}`
          const now = Date.now()
          const found = yield* sql`SELECT * FROM receipts WHERE command_id = ${commandId}`
          if (found.length > 0) return yield* Effect.dieMessage(`floor: receipt ${commandId} already exists`)
          const version = (versions.get(aggregateId) ?? 0) + 1
          versions.set(aggregateId, version)
          const [row] = yield* sql<{ sequence: number }>`INSERT INTO events ${sql.insert({
            event_id: `${commandId}/e0`,
            aggregate_type: "counter",
            aggregate_id: aggregateId,
            version,
            type: "counter.bumped",
            schema_version: 1,
            payload: JSON.stringify({ type: "counter.bumped", by: 1 }),
            command_id: commandId,
            occurred_at: now
          })} RETURNING sequence`
          const sequence = row!.sequence
          yield* sql`INSERT INTO bench_counters (counter_id, total, updated_seq) VALUES (${aggregateId}, 1, ${sequence})
            ON CONFLICT (counter_id) DO UPDATE SET total = total + 1, updated_seq = excluded.updated_seq`
          const effectId = `${commandId}:0`
          yield* sql`INSERT INTO receipts ${sql.insert({
            command_id: commandId,
            aggregate_type: "counter",
            aggregate_id: aggregateId,
            command_type: "counter.bump",
            fingerprint: `fp-${i}`,
            status: "accepted",
            first_sequence: sequence,
            last_sequence: sequence,
            effect_ids: JSON.stringify([effectId]),
            rejection: null,
            accepted_at: now
          })}`
          yield* sql`INSERT INTO outbox ${sql.insert({
            effect_id: effectId,
            command_id: commandId,
            aggregate_type: "counter",
            aggregate_id: aggregateId,
            kind: "bench.effect",
            payload: JSON.stringify({ n: i }),
            lane: `counter:${aggregateId}`,
            status: "pending",
            attempts: 0,
            available_at: now,
            created_at: now,
            updated_at: now
          })} ON CONFLICT (effect_id) DO NOTHING`
        })
      const start = nowMs()
      for (let from = 0; from < ops; from += batch) {
        const to = Math.min(ops, from + batch)
        yield* sql.withTransaction(
          Effect.forEach(
            Array.from({ length: to - from }, (_, k) => from + k),
            command,
            { discard: true }
          )
        )
      }
      return { ops, seconds: (nowMs() - start) / 1000, latenciesMs: [] }
    })
  )
