/**
 * Durable timers: the `timers` table, owned here (columns, row encoding, every statement). A decision
 * schedules, moves or cancels a timer and the processor writes it in the same transaction as the
 * decision's events; the timer loop (TimerLoop.ts) claims due rows and dispatches their command
 * through the front door. Timers are not outbox rows, so they never block an aggregate's effect lane.
 *
 * One row per (aggregate, timerId). Every schedule of an existing row bumps its `generation`, and
 * the fired command's id carries it (`timer:<type>:<id>:<timerId>#<generation>`): a moved timer
 * fires under a new id, so its new time is not answered as a duplicate of a fire that already
 * landed under the old generation, and a stale fire never marks the moved row as fired.
 *
 * `attempts` counts the fires of the current generation that failed in the aggregate's own code (a
 * CommandDefect: TimerLoop bounds them). It is a column, not a count in memory, so the bound holds
 * across restarts and across the processes of a shared store; a new generation starts from zero.
 *
 * A generation that can never fire is marked `failed` with why (`failure_reason`, `failure_message`,
 * what its aggregate was told: TimerFailures.ts), in the statement that marks it, so an operator
 * listing failed timers reads the reason from the store rather than from a log that may be gone. A
 * new generation clears them, as it clears `attempts`.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Schema } from "effect"
import * as StoredJson from "./StoredJson.js"
import { boundedId } from "./CommandId.js"
import { canonicalJson } from "./CanonicalJson.js"
import type { TimerFailureReason } from "./TimerFailures.js"

/** A timer a decision schedules (or moves, when `timerId` is already scheduled). */
export interface TimerIntent {
  /** Names the timer within its aggregate; scheduling the same id again moves it. */
  readonly timerId: string
  /** When to fire, epoch ms (the engine's Clock). */
  readonly at: number
  /** Dispatched at `at` with origin internal; its `commandId` is set by the engine. */
  readonly command: { readonly type: string; readonly [field: string]: unknown }
}

export type TimerStatus = "pending" | "fired" | "cancelled" | "failed"

/**
 * Why a generation could not fire, as its row keeps it: the reason and message its aggregate was
 * told. The message comes bounded (TimerFailures.boundedMessage), so the row holds what the tell held.
 */
export interface StoredFailure {
  readonly reason: TimerFailureReason
  readonly message: string
}

/** How a claimed generation ends: fired, or failed with why. */
export type Settlement = { readonly status: "fired" } | ({ readonly status: "failed" } & StoredFailure)

export interface TimerRow {
  readonly aggregateType: string
  readonly aggregateId: string
  readonly timerId: string
  readonly generation: number
  readonly dueAt: number
  readonly command: Record<string, unknown>
  readonly status: TimerStatus
  /** Fires of this generation that failed in the aggregate's own code (a CommandDefect). */
  readonly attempts: number
  /** When the row last changed (scheduled, cancelled, tried, settled), epoch ms. */
  readonly updatedAt: number
  /**
   * Present when the stored command is not JSON, or not an object (then `command` is empty): why. Such
   * a timer is failed, never fired.
   */
  readonly undecodable?: string
  /**
   * Present when this generation is failed, or was found unable to fire and is being failed (its
   * aggregate told, then the mark: see recordFailure): why it could not fire.
   */
  readonly failure?: StoredFailure
}

interface RawRow {
  readonly aggregate_type: string
  readonly aggregate_id: string
  readonly timer_id: string
  readonly generation: number | string
  readonly due_at: number | string
  readonly command: string
  readonly status: TimerStatus
  readonly attempts: number | string
  readonly updated_at: number | string
  readonly failure_reason: TimerFailureReason | null
  readonly failure_message: string | null
}

/** The columns toRow reads, named once for the claim's RETURNING and every SELECT. */
const rowColumns = `aggregate_type, aggregate_id, timer_id, generation, due_at, command, status, attempts, updated_at,
  failure_reason, failure_message`

/**
 * A command is an object. Checked because a number or a list spread into the dispatched command gave
 * just its id (or its indices), refused as an invalid command instead of said to be unreadable.
 */
const readCommand = StoredJson.reader(Schema.Record({ key: Schema.String, value: Schema.Unknown }), "command")

/**
 * Never throws: a throw here, in the claim of a page of due timers, left the whole page claimed and
 * unfired, and the same page was claimed again (and thrown again) at every lease's end.
 */
const toRow = (r: RawRow): TimerRow => {
  const read = readCommand(r.command)
  const row: TimerRow = {
    aggregateType: r.aggregate_type,
    aggregateId: r.aggregate_id,
    timerId: r.timer_id,
    generation: Number(r.generation),
    dueAt: Number(r.due_at),
    command: read.ok ? read.value : {},
    status: r.status,
    attempts: Number(r.attempts),
    updatedAt: Number(r.updated_at)
  }
  const failed =
    r.failure_reason === null
      ? row
      : { ...row, failure: { reason: r.failure_reason, message: r.failure_message ?? "" } }
  return read.ok ? failed : { ...failed, undecodable: read.why }
}

/** The table (migration 0005_timers). */
export const createTable = Effect.gen(function* () {
  const sql = yield* SqlClient
  const int = sql.onDialectOrElse({ pg: () => "BIGINT", orElse: () => "INTEGER" })
  yield* sql.unsafe(`CREATE TABLE timers (
    aggregate_type TEXT NOT NULL,
    aggregate_id TEXT NOT NULL,
    timer_id TEXT NOT NULL,
    generation ${int} NOT NULL,
    due_at ${int} NOT NULL,
    command TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'fired', 'cancelled', 'failed')),
    claimed_until ${int},
    updated_at ${int} NOT NULL,
    PRIMARY KEY (aggregate_type, aggregate_id, timer_id)
  )`)
  yield* sql`CREATE INDEX timers_due ON timers (status, due_at)`
})

/** The count of a generation's fires that failed in domain code (migration 0009_timer_attempts). */
export const addAttempts = Effect.gen(function* () {
  const sql = yield* SqlClient
  const int = sql.onDialectOrElse({ pg: () => "BIGINT", orElse: () => "INTEGER" })
  yield* sql.unsafe(`ALTER TABLE timers ADD COLUMN attempts ${int} NOT NULL DEFAULT 0`)
})

/**
 * Why a generation failed (migration 0010_timer_failures). The reasons are written out, not taken from
 * TimerFailureReason: a migration is history, and a new reason is a new migration (on SQLite a rebuild,
 * as 0003 rebuilt the outbox for a new status). The index serves `list`: most recently changed first
 * within a status, without sorting every fired row of a long-lived store.
 */
export const addFailures = Effect.gen(function* () {
  const sql = yield* SqlClient
  yield* sql.unsafe(`ALTER TABLE timers ADD COLUMN failure_reason TEXT
    CHECK (failure_reason IN ('invalid-command', 'command-id-conflict', 'unreadable', 'defect'))`)
  yield* sql.unsafe(`ALTER TABLE timers ADD COLUMN failure_message TEXT`)
  yield* sql`CREATE INDEX timers_by_status_time ON timers (status, updated_at)`
})

/** The id the fire is dispatched under; the receipt makes a second fire of one generation a duplicate. */
export const fireId = (row: Pick<TimerRow, "aggregateType" | "aggregateId" | "timerId" | "generation">): string =>
  boundedId("timer:", `${row.aggregateType}:${row.aggregateId}:${row.timerId}#${row.generation}`)

/** Runs one statement per item, in order, in the caller's transaction (the decision's). */
const eachStatement = <A>(
  items: ReadonlyArray<A>,
  statement: (sql: SqlClient, item: A) => Effect.Effect<unknown, SqlError>
): Effect.Effect<void, SqlError, SqlClient> =>
  Effect.flatMap(SqlClient, (sql) => Effect.forEach(items, (item) => statement(sql, item), { discard: true }))

/** Schedules or moves (a new generation, pending again, unclaimed, no tries, no failure). Runs in the decision's transaction. */
export const schedule = (aggregateType: string, aggregateId: string, timers: ReadonlyArray<TimerIntent>, now: number) =>
  eachStatement(
    timers,
    (sql, t) => sql`INSERT INTO timers (aggregate_type, aggregate_id, timer_id, generation, due_at, command, status,
        claimed_until, updated_at)
        VALUES (${aggregateType}, ${aggregateId}, ${t.timerId}, 1, ${t.at}, ${canonicalJson(t.command)}, 'pending',
        NULL, ${now})
        ON CONFLICT (aggregate_type, aggregate_id, timer_id) DO UPDATE SET generation = timers.generation + 1,
        due_at = excluded.due_at, command = excluded.command, status = 'pending', claimed_until = NULL,
        attempts = 0, failure_reason = NULL, failure_message = NULL, updated_at = excluded.updated_at`
  )

/** Cancels pending timers of the aggregate; an unknown or already fired timer is left as it is. */
export const cancel = (aggregateType: string, aggregateId: string, timerIds: ReadonlyArray<string>, now: number) =>
  eachStatement(
    timerIds,
    (sql, timerId) => sql`UPDATE timers SET status = 'cancelled', claimed_until = NULL, updated_at = ${now}
        WHERE aggregate_type = ${aggregateType} AND aggregate_id = ${aggregateId} AND timer_id = ${timerId}
        AND status = 'pending'`
  )

/**
 * Claims up to `limit` due timers, earliest first, for `leaseMs`: another process skips them until
 * the lease ends (on PostgreSQL the rows are picked with FOR UPDATE SKIP LOCKED, so two claimers never
 * take the same row). A claimer that dies leaves its rows to be claimed again after the lease; the
 * receipt answers the second fire as a duplicate.
 */
export const claimDue = (
  now: number,
  leaseMs: number,
  limit: number
): Effect.Effect<ReadonlyArray<TimerRow>, SqlError, SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const lock = sql.onDialectOrElse({ pg: () => "FOR UPDATE SKIP LOCKED", orElse: () => "" })
    const rows = yield* sql<RawRow>`UPDATE timers SET claimed_until = ${now + leaseMs}
      WHERE (aggregate_type, aggregate_id, timer_id) IN (
        SELECT aggregate_type, aggregate_id, timer_id FROM timers
        WHERE status = 'pending' AND due_at <= ${now} AND (claimed_until IS NULL OR claimed_until <= ${now})
        ORDER BY due_at, aggregate_type, aggregate_id, timer_id LIMIT ${limit} ${sql.literal(lock)})
      RETURNING ${sql.literal(rowColumns)}`
    // RETURNING has no order of its own.
    return rows.map(toRow).sort((a, b) => a.dueAt - b.dueAt)
  })

/**
 * Drops every claim. Only for a store this process holds alone (SQLite): any claim there was made by a
 * process that is gone, and waiting out its lease would delay an overdue fire by up to the lease.
 */
export const releaseAllClaims: Effect.Effect<void, SqlError, SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient
  yield* sql`UPDATE timers SET claimed_until = NULL WHERE status = 'pending' AND claimed_until IS NOT NULL`
})

/**
 * Gives claimed rows back at once (their generation, if still pending): rows of a claim the loop did
 * not try, so they are not held for a lease because another row's fire was not taken.
 */
export const release = (rows: ReadonlyArray<TimerRow>, now: number) =>
  eachStatement(
    rows,
    (sql, row) => sql`UPDATE timers SET claimed_until = NULL, updated_at = ${now}
      WHERE aggregate_type = ${row.aggregateType} AND aggregate_id = ${row.aggregateId}
      AND timer_id = ${row.timerId} AND generation = ${row.generation} AND status = 'pending'`
  )

/**
 * Counts a fire of this generation that failed in the aggregate's own code, and keeps the row claimed
 * until `retryAt` (no process tries it before). A row moved meanwhile is a new generation and untouched.
 */
export const recordDefect = (row: TimerRow, now: number, retryAt: number): Effect.Effect<void, SqlError, SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    yield* sql`UPDATE timers SET attempts = attempts + 1, claimed_until = ${retryAt}, updated_at = ${now}
      WHERE aggregate_type = ${row.aggregateType} AND aggregate_id = ${row.aggregateId}
      AND timer_id = ${row.timerId} AND generation = ${row.generation} AND status = 'pending'`
  })

/**
 * Records why a pending generation cannot fire, before its aggregate is told: from then on it is never
 * fired, only told (again, under the tell's id) and marked failed. Without it, a generation whose
 * tell committed but whose `failed` mark did not (a refused write, a crash between the two) was
 * claimed again as pending and fired: after a fix, it fired after its aggregate had recorded that it
 * never could.
 */
export const recordFailure = (
  row: TimerRow,
  failure: StoredFailure,
  now: number
): Effect.Effect<void, SqlError, SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    yield* sql`UPDATE timers SET failure_reason = ${failure.reason}, failure_message = ${failure.message}, updated_at = ${now}
      WHERE aggregate_type = ${row.aggregateType} AND aggregate_id = ${row.aggregateId}
      AND timer_id = ${row.timerId} AND generation = ${row.generation} AND status IN ('pending', 'cancelled')`
  })

/**
 * Marks a fired (or unfireable) generation, a failed one with why; a row moved meanwhile is a new
 * generation and stays as it is. An unfireable generation is marked failed even when cancelled: the
 * aggregate is told before the mark, and a domain closing what the timer guarded cancels its timer in
 * that very decision (a thread's turn cancels the timers of its waits). Left `cancelled`, its failure
 * would be hidden.
 */
export const settle = (row: TimerRow, settlement: Settlement, now: number): Effect.Effect<void, SqlError, SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const failed = settlement.status === "failed"
    const from = sql.literal(failed ? "'pending', 'cancelled'" : "'pending'")
    yield* sql`UPDATE timers SET status = ${settlement.status}, claimed_until = NULL, updated_at = ${now},
      failure_reason = ${failed ? settlement.reason : null}, failure_message = ${failed ? settlement.message : null}
      WHERE aggregate_type = ${row.aggregateType} AND aggregate_id = ${row.aggregateId}
      AND timer_id = ${row.timerId} AND generation = ${row.generation} AND status IN (${from})`
  })

/** When the loop should look next: the earliest pending due time (or a claim's end), if any. */
export const nextDue = (): Effect.Effect<number | undefined, SqlError, SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const [row] = yield* sql<{ next: number | string | null }>`SELECT MIN(CASE WHEN claimed_until IS NOT NULL
      AND claimed_until > due_at THEN claimed_until ELSE due_at END) AS next FROM timers WHERE status = 'pending'`
    return row?.next === null || row?.next === undefined ? undefined : Number(row.next)
  })

/** The most rows one `list` answers: a page an operator reads, not a dump of the table. */
export const LIST_MAX = 1_000

export interface ListOptions {
  readonly status: TimerStatus
  /** At most this many (default 100, clamped to 1..LIST_MAX). */
  readonly limit?: number | undefined
}

/**
 * Timers in one status, most recently changed first (for `failed`, most recently failed first), for
 * operators. Status is required: every read stays on `timers_by_status_time`.
 */
export const list = (options: ListOptions): Effect.Effect<ReadonlyArray<TimerRow>, SqlError, SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const asked = options.limit ?? 100
    const limit = Number.isFinite(asked) ? Math.min(LIST_MAX, Math.max(1, Math.trunc(asked))) : 100
    const rows = yield* sql<RawRow>`SELECT ${sql.literal(rowColumns)} FROM timers WHERE status = ${options.status}
      ORDER BY updated_at DESC, aggregate_type, aggregate_id, timer_id LIMIT ${limit}`
    return rows.map(toRow)
  })

/** Every timer of an aggregate, for tests and operators. */
export const ofAggregate = (
  aggregateType: string,
  aggregateId: string
): Effect.Effect<ReadonlyArray<TimerRow>, SqlError, SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const rows =
      yield* sql<RawRow>`SELECT ${sql.literal(rowColumns)} FROM timers WHERE aggregate_type = ${aggregateType}
      AND aggregate_id = ${aggregateId} ORDER BY timer_id`
    return rows.map(toRow)
  })
