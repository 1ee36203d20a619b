/**
 * The audit: the invariants the engine's contract promises, checked against a store over any
 * SqlClient (SQLite or PostgreSQL). It only reads; run it inside one read transaction for a
 * consistent snapshot (`orchestrator db check` does, on a SQLite file the server is not running on).
 *
 * - `event-sequence-gap` (SQLite): the log's sequences run 1..head with no hole (events are never
 *   deleted; a rolled-back write rolls back its sequence too). The head is also read from
 *   sqlite_sequence, so missing newest events are found. Not on PostgreSQL: a sequence value is
 *   handed out outside the transaction, so a rolled-back dispatch leaves a hole by design (gaps are
 *   allowed there, skips never; StoreBackend.ts).
 * - `aggregate-version-gap`: each aggregate's versions run 1..n.
 * - `receipt-events-missing`: an accepted receipt with first_sequence..last_sequence has exactly
 *   those events, all under its command id (they committed together).
 * - `event-receipt-mismatch`: events under a command whose receipt is rejected, says it decided no
 *   events, or names another aggregate.
 * - `event-without-receipt`: an event whose command has no receipt (unless that receipt may have
 *   been pruned: older than the receipt retention period).
 * - `receipt-effect-missing`: an accepted receipt lists an effect id with no outbox row (unless the
 *   row may have been pruned: settled effects are kept for their retention period).
 * - `effect-without-receipt`: an outbox row whose deciding command has no accepted receipt.
 * - `settlement-unheard`: a settled outbox row whose owning aggregate never heard the outcome. The
 *   durable evidence: settling changes the row in the commit of a command on the owning aggregate
 *   (EffectOutcomes.decideSettlement, or a decision's `cancel`), and that command's accepted receipt
 *   has `accepted_at` equal to the row's `updated_at` (both are the command's clock reading). A
 *   succeeded or failed row must have it under the settlement's own id, `outcome:<effectId>#<attempts>`
 *   (the reactor), `reconcile:<effectId>#<attempts>` (boot reconcile) or `reclaim:<effectId>#<attempts>`
 *   (a reactor's reclaim of a dead owner's row); a cancelled row under any command of that aggregate
 *   (an operator's `effect.cancel`, or the aggregate's own decision to cancel). The events that
 *   command decided are checked by `receipt-events-missing`.
 *
 * Rows older than the retention periods (Retention.defaults unless told otherwise) may have been
 * pruned, so a reference to one is not counted as missing. The rules themselves are pure
 * (AuditFindings.ts); this module reads the rows, a page at a time.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import * as AuditFindings from "./AuditFindings.js"
import { type RetentionOptions, horizonsAt } from "./Retention.js"

export type { AuditCheck, Finding } from "./AuditFindings.js"

export interface Totals {
  readonly events: number
  readonly receipts: number
  readonly effects: number
  readonly settledEffects: number
}

export interface Counts extends Totals {
  /** The log head: the highest sequence handed out (SQLite) or seen (PostgreSQL). */
  readonly head: number
  readonly aggregates: number
}

export interface AuditReport {
  readonly ok: boolean
  readonly counts: Counts
  readonly findings: ReadonlyArray<AuditFindings.Finding>
}

export interface AuditOptions {
  /** The clock reading the retention horizons are measured from. */
  readonly now: number
  /** The periods the store is pruned by; Retention.defaults when not given. */
  readonly retention?: RetentionOptions | undefined
  /** Already counted (a caller that sized a progress bar with them); counted here when not given. */
  readonly totals?: Totals | undefined
  /** Told how many rows were read after each page (a progress bar's total is the totals' sum). */
  readonly advance?: ((rows: number) => void) | undefined
}

const page = 2_000
/** Effect ids looked up per statement (well under both stores' bound-parameter limits). */
const idsPerLookup = 500
const settledList = AuditFindings.settledStatuses.map((s) => `'${s}'`).join(", ")

/** Row counts of the engine's tables. */
export const totals: Effect.Effect<Totals, SqlError, SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient
  const [row] = yield* sql<Record<keyof Totals, number | string>>`SELECT
      (SELECT COUNT(*) FROM events) AS events,
      (SELECT COUNT(*) FROM receipts) AS receipts,
      (SELECT COUNT(*) FROM outbox) AS effects,
      (SELECT COUNT(*) FROM outbox WHERE status IN (${sql.literal(settledList)})) AS "settledEffects"`
  return {
    events: Number(row?.events ?? 0),
    receipts: Number(row?.receipts ?? 0),
    effects: Number(row?.effects ?? 0),
    settledEffects: Number(row?.settledEffects ?? 0)
  }
})

/** Checks every invariant over the whole store. */
export const run = (options: AuditOptions): Effect.Effect<AuditReport, SqlError, SqlClient> =>
  Effect.gen(function* () {
    const horizons = horizonsAt(options.now, options.retention)
    const advance = options.advance ?? (() => undefined)
    const counted = options.totals ?? (yield* totals)
    const events = yield* auditEvents(horizons, advance)
    const versions = yield* auditVersions
    const receipts = yield* auditReceipts(horizons, advance)
    const outbox = yield* auditOutbox(horizons, advance)
    const findings = [...events.findings, ...versions.findings, ...receipts, ...outbox]
    return {
      ok: findings.length === 0,
      counts: { ...counted, head: events.head, aggregates: versions.aggregates },
      findings
    }
  })

/** Sequence holes (SQLite), and commands without receipts: one pass over the log, by sequence. */
const auditEvents = (horizons: AuditFindings.Horizons, advance: (rows: number) => void) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const holesAreFindings = sql.onDialectOrElse({ pg: () => false, orElse: () => true })
    const findings: Array<AuditFindings.Finding> = []
    const orphaned = new Map<string, { from: number; to: number; n: number }>()
    let last = 0
    while (true) {
      const rows = yield* sql<{
        sequence: number | string
        command_id: string
        occurred_at: number | string
        has_receipt: number
      }>`SELECT e.sequence, e.command_id, e.occurred_at,
          CASE WHEN EXISTS (SELECT 1 FROM receipts r WHERE r.command_id = e.command_id) THEN 1 ELSE 0 END AS has_receipt
        FROM events e WHERE e.sequence > ${last} ORDER BY e.sequence LIMIT ${page}`
      if (rows.length === 0) break
      const sequences = rows.map((r) => Number(r.sequence))
      if (holesAreFindings) findings.push(...AuditFindings.sequenceGaps(last, sequences))
      rows.forEach((row, i) => {
        const sequence = sequences[i]!
        if (Number(row.has_receipt) === 0 && Number(row.occurred_at) >= horizons.receiptsBefore) {
          const seen = orphaned.get(row.command_id)
          orphaned.set(
            row.command_id,
            seen === undefined ? { from: sequence, to: sequence, n: 1 } : { ...seen, to: sequence, n: seen.n + 1 }
          )
        }
      })
      last = sequences.at(-1)!
      advance(rows.length)
    }
    const head = holesAreFindings ? Math.max(last, yield* sqliteSequenceHead) : last
    if (head > last) findings.push(AuditFindings.gap(last + 1, head))
    for (const [commandId, span] of orphaned) findings.push(AuditFindings.eventsWithoutReceipt(commandId, span))
    return { head, findings }
  })

/** The highest event sequence SQLite handed out (0 before the first). */
const sqliteSequenceHead = Effect.gen(function* () {
  const sql = yield* SqlClient
  const table = yield* sql`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'`
  if (table.length === 0) return 0
  const [row] = yield* sql<{ seq: number | null }>`SELECT seq FROM sqlite_sequence WHERE name = 'events'`
  return Number(row?.seq ?? 0)
})

const auditVersions = Effect.gen(function* () {
  const sql = yield* SqlClient
  const rows = yield* sql<{
    aggregate_type: string
    aggregate_id: string
    n: number | string
    lo: number | string
    hi: number | string
  }>`SELECT aggregate_type, aggregate_id, COUNT(*) AS n, MIN(version) AS lo, MAX(version) AS hi
    FROM events GROUP BY aggregate_type, aggregate_id`
  const findings = rows.flatMap((v) =>
    AuditFindings.versionProblems({ ...v, n: Number(v.n), lo: Number(v.lo), hi: Number(v.hi) })
  )
  return { aggregates: rows.length, findings }
})

const orNull = (value: number | string | null) => (value === null ? null : Number(value))

/** Receipts: their events and their effects, a page of receipts at a time. */
const auditReceipts = (horizons: AuditFindings.Horizons, advance: (rows: number) => void) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const findings: Array<AuditFindings.Finding> = []
    let after = ""
    while (true) {
      const raw = yield* sql<{
        [K in keyof AuditFindings.ReceiptRow]: AuditFindings.ReceiptRow[K] extends number
          ? number | string
          : AuditFindings.ReceiptRow[K] extends number | null
            ? number | string | null
            : AuditFindings.ReceiptRow[K]
      }>`SELECT r.command_id, r.status, r.aggregate_type, r.aggregate_id, r.first_sequence, r.last_sequence,
          r.effect_ids, r.accepted_at,
          (SELECT COUNT(*) FROM events e WHERE e.command_id = r.command_id) AS n,
          (SELECT MIN(e.sequence) FROM events e WHERE e.command_id = r.command_id) AS lo,
          (SELECT MAX(e.sequence) FROM events e WHERE e.command_id = r.command_id) AS hi,
          (SELECT COUNT(*) FROM events e WHERE e.command_id = r.command_id
            AND (e.aggregate_type <> r.aggregate_type OR e.aggregate_id <> r.aggregate_id)) AS foreign_n
        FROM receipts r WHERE r.command_id > ${after} ORDER BY r.command_id LIMIT ${page}`
      if (raw.length === 0) break
      const rows: Array<AuditFindings.ReceiptRow> = raw.map((r) => ({
        ...r,
        first_sequence: orNull(r.first_sequence),
        last_sequence: Number(r.last_sequence),
        accepted_at: Number(r.accepted_at),
        n: Number(r.n),
        lo: orNull(r.lo),
        hi: orNull(r.hi),
        foreign_n: Number(r.foreign_n)
      }))
      const listed = rows.map((row) => AuditFindings.listedEffects(row, horizons))
      const existing = yield* existingEffects(listed.flat())
      rows.forEach((row, i) => {
        const missing = listed[i]!.filter((id) => !existing.has(id))
        findings.push(...AuditFindings.receiptProblems(row, missing))
      })
      after = rows.at(-1)!.command_id
      advance(rows.length)
    }
    return findings
  })

/** Which of these effect ids have an outbox row. */
const existingEffects = (ids: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const found = new Set<string>()
    for (let i = 0; i < ids.length; i += idsPerLookup) {
      const rows = yield* sql<{ effect_id: string }>`SELECT effect_id FROM outbox
        WHERE ${sql.in("effect_id", ids.slice(i, i + idsPerLookup))}`
      for (const row of rows) found.add(row.effect_id)
    }
    return found
  })

/** Outbox rows: their deciding receipt and, once settled, the evidence the owner heard it. */
const auditOutbox = (horizons: AuditFindings.Horizons, advance: (rows: number) => void) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const findings: Array<AuditFindings.Finding> = []
    let sequence = 0
    while (true) {
      const rows = yield* sql<{
        sequence: number | string
        effect_id: string
        command_id: string
        status: string
        attempts: number | string
        aggregate_type: string
        aggregate_id: string
        created_at: number | string
        updated_at: number | string
        decided: string | null
        heard: number | string
      }>`SELECT o.sequence, o.effect_id, o.command_id, o.status, o.attempts, o.aggregate_type, o.aggregate_id,
          o.created_at, o.updated_at,
          (SELECT r.status FROM receipts r WHERE r.command_id = o.command_id) AS decided,
          CASE
            WHEN o.status NOT IN (${sql.literal(settledList)}) THEN 1
            -- The settlement's own ids first: primary-key lookups.
            WHEN EXISTS (
              SELECT 1 FROM receipts r
              WHERE r.command_id IN ('outcome:' || o.effect_id || '#' || CAST(o.attempts AS TEXT),
                  'reconcile:' || o.effect_id || '#' || CAST(o.attempts AS TEXT),
                  'reclaim:' || o.effect_id || '#' || CAST(o.attempts AS TEXT))
                -- The unary + keeps SQLite on the primary key (the time index would scan a busy millisecond).
                AND r.status = 'accepted' AND +r.accepted_at = o.updated_at
                AND r.aggregate_type = o.aggregate_type AND r.aggregate_id = o.aggregate_id
            ) THEN 1
            -- A cancel (an operator's, under the default id or their own, or the aggregate's decision): by time.
            WHEN o.status = 'cancelled' AND EXISTS (
              SELECT 1 FROM receipts r
              WHERE r.accepted_at = o.updated_at AND r.status = 'accepted'
                AND r.aggregate_type = o.aggregate_type AND r.aggregate_id = o.aggregate_id
            ) THEN 1
            ELSE 0
          END AS heard
        FROM outbox o WHERE o.sequence > ${sequence} ORDER BY o.sequence LIMIT ${page}`
      if (rows.length === 0) break
      for (const row of rows) {
        findings.push(
          ...AuditFindings.outboxProblems(
            {
              ...row,
              attempts: Number(row.attempts),
              created_at: Number(row.created_at),
              updated_at: Number(row.updated_at),
              heard: Number(row.heard)
            },
            horizons
          )
        )
      }
      sequence = Number(rows.at(-1)!.sequence)
      advance(rows.length)
    }
    return findings
  })
