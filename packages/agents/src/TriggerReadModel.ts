/**
 * The trigger list: one row per trigger, updated in the commit transaction of its events, so
 * `GET /v1/triggers` shows exactly what the store holds (the next fire time is the pending tick's).
 */
import type { SqlClient as SqlClientService } from "@effect/sql/SqlClient"
import { SqlClient } from "@effect/sql/SqlClient"
import { Projection } from "@orchestration/engine"
import { Effect } from "effect"
import { timezoneOf, Trigger, type TriggerEvent } from "./Trigger.js"

const run = <A>(f: (sql: SqlClientService) => Effect.Effect<A, any, any>) =>
  Effect.flatMap(SqlClient, f).pipe(Effect.asVoid)

export const TriggerViews = Projection.make(Trigger, {
  name: "agent_triggers",
  setup: run(
    (sql) => sql`CREATE TABLE IF NOT EXISTS agent_triggers (trigger_id TEXT PRIMARY KEY, cron TEXT NOT NULL,
      timezone TEXT NOT NULL, thread_id TEXT NOT NULL, text TEXT NOT NULL, status TEXT NOT NULL,
      next_fire_at BIGINT, last_fired_at BIGINT, last_delivery TEXT, updated_seq BIGINT NOT NULL)`
  ),
  reset: run((sql) => sql`DELETE FROM agent_triggers`),
  apply: (event: TriggerEvent, record) => {
    const triggerId = record.aggregateId
    const seq = record.sequence
    switch (event.type) {
      case "trigger.put":
        return run(
          (sql) => sql`INSERT INTO agent_triggers (trigger_id, cron, timezone, thread_id, text, status, next_fire_at,
            last_fired_at, last_delivery, updated_seq)
            VALUES (${triggerId}, ${event.spec.cron}, ${timezoneOf(event.spec)}, ${event.spec.threadId}, ${event.spec.text},
            'active', ${event.nextAt}, NULL, NULL, ${seq})
            ON CONFLICT (trigger_id) DO UPDATE SET cron = excluded.cron, timezone = excluded.timezone,
            thread_id = excluded.thread_id, text = excluded.text, status = 'active',
            next_fire_at = excluded.next_fire_at, updated_seq = excluded.updated_seq`
        )
      case "trigger.deleted":
        return run(
          (sql) =>
            sql`UPDATE agent_triggers SET status = 'deleted', next_fire_at = NULL, updated_seq = ${seq} WHERE trigger_id = ${triggerId}`
        )
      case "trigger.fired":
        return run(
          (sql) => sql`UPDATE agent_triggers SET next_fire_at = ${event.nextAt}, last_fired_at = ${event.at},
            updated_seq = ${seq} WHERE trigger_id = ${triggerId}`
        )
      case "trigger.tick-failed":
        return run(
          (sql) => sql`UPDATE agent_triggers SET next_fire_at = ${event.nextAt}, last_delivery = 'tick-failed',
            updated_seq = ${seq} WHERE trigger_id = ${triggerId}`
        )
      case "trigger.delivered":
        return run(
          (sql) =>
            sql`UPDATE agent_triggers SET last_delivery = ${event.status}, updated_seq = ${seq} WHERE trigger_id = ${triggerId}`
        )
    }
  }
})

export interface TriggerSummary {
  readonly triggerId: string
  readonly cron: string
  readonly timezone: string
  readonly threadId: string
  readonly text: string
  /** Epoch ms of the next tick; null when none is scheduled (the cron has no later time). */
  readonly nextFireAt: number | null
  readonly lastFiredAt: number | null
  /**
   * How the last tick's message.send went: succeeded, failed, cancelled; `tick-failed` when the tick
   * itself could not fire (nothing was sent); null before the first.
   */
  readonly lastDelivery: string | null
}

interface RawTrigger {
  readonly trigger_id: string
  readonly cron: string
  readonly timezone: string
  readonly thread_id: string
  readonly text: string
  readonly next_fire_at: number | string | null
  readonly last_fired_at: number | string | null
  readonly last_delivery: string | null
}

const numberOrNull = (value: number | string | null) => (value === null ? null : Number(value))

const toSummary = (r: RawTrigger): TriggerSummary => ({
  triggerId: r.trigger_id,
  cron: r.cron,
  timezone: r.timezone,
  threadId: r.thread_id,
  text: r.text,
  nextFireAt: numberOrNull(r.next_fire_at),
  lastFiredAt: numberOrNull(r.last_fired_at),
  lastDelivery: r.last_delivery
})

const SELECT_COLUMNS = "trigger_id, cron, timezone, thread_id, text, next_fire_at, last_fired_at, last_delivery"

/** One trigger, deleted or not; undefined when it was never put. */
export const findTrigger = (triggerId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const rows =
      yield* sql<RawTrigger>`SELECT ${sql.literal(SELECT_COLUMNS)} FROM agent_triggers WHERE trigger_id = ${triggerId}`
    return rows[0] === undefined ? undefined : toSummary(rows[0])
  })

/** Every trigger that is not deleted, soonest next fire first; bounded by `limit`. */
export const listTriggers = (options: { readonly limit: number }) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const rows =
      yield* sql<RawTrigger>`SELECT ${sql.literal(SELECT_COLUMNS)} FROM agent_triggers WHERE status = 'active'
      ORDER BY CASE WHEN next_fire_at IS NULL THEN 1 ELSE 0 END, next_fire_at, trigger_id LIMIT ${options.limit}`
    return rows.map(toSummary)
  })
