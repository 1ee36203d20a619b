/**
 * The outbox: one row per effect intent, written in the commit transaction of the command that
 * decided it. Post-commit work is taken from these committed rows, never from memory. Effect ids are
 * deterministic, so writing the same intent twice leaves one row.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export type OutboxStatus = "pending" | "running" | "succeeded" | "failed" | "cancelled"

export interface NewOutboxRow {
  readonly effectId: string
  readonly commandId: string
  readonly aggregateType: string
  readonly aggregateId: string
  readonly kind: string
  readonly payloadJson: string
  readonly lane: string
  readonly availableAt: number
  readonly now: number
}

export const insert = (rows: ReadonlyArray<NewOutboxRow>) =>
  Effect.gen(function* () {
    if (rows.length === 0) return
    const sql = yield* SqlClient
    yield* sql`INSERT INTO outbox ${
      sql.insert(rows.map((r) => ({
        effect_id: r.effectId,
        command_id: r.commandId,
        aggregate_type: r.aggregateType,
        aggregate_id: r.aggregateId,
        kind: r.kind,
        payload: r.payloadJson,
        lane: r.lane,
        status: "pending",
        attempts: 0,
        available_at: r.availableAt,
        created_at: r.now,
        updated_at: r.now
      })))
    } ON CONFLICT (effect_id) DO NOTHING`
  })
