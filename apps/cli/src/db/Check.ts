/**
 * `db check`: the invariants the engine's contract promises, checked against the SQLite file.
 *
 * - `event-sequence-gap`: the log's sequences run 1..head with no hole (events are never deleted;
 *   a rolled-back write rolls back its sequence too). The head is also read from sqlite_sequence,
 *   so missing newest events are found.
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
 *   (EffectOutcomes.decideSettlement / Processor.decideSettlementCommand, or a decision's `cancel`),
 *   and that command's accepted receipt has `accepted_at` equal to the row's `updated_at` (both are
 *   the command's clock reading). A succeeded or failed row must have it under the settlement's own
 *   id, `outcome:<effectId>#<attempts>` (the reactor), `reconcile:<effectId>#<attempts>` (boot
 *   reconcile) or `reclaim:<effectId>#<attempts>` (a reactor's reclaim of a dead owner's row); a cancelled row under any command of that aggregate (an operator's
 *   `effect.cancel`, or the aggregate's own decision to cancel). The events that command decided
 *   are checked by `receipt-events-missing`.
 * - `transcript-invalid` / `transcript-unreadable`: every thread's transcript (agents domain)
 *   passes validateTranscript, with positions 1..n; open calls at the end are allowed only while
 *   the thread is running, as GET /v1/threads/:id/transcript does.
 * - `ledger-repeated` / `ledger-unreadable` (agents domain, when its world directory is found): the
 *   world's `ledger.jsonl` gets a line before every performance starts, so two lines for one
 *   effect id of a process-bound kind (tool.execute; a tool.mcp_call line carries its own policy) mean it was performed twice,
 *   which that policy forbids. Replay-safe kinds may repeat.
 */
import type { Transcript } from "@orchestration/agents"
import { EffectOutcomes } from "@orchestration/engine"
import { Effect, Either, Schema } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import type { Progress } from "../Progress.js"
import * as StoreFile from "./StoreFile.js"

export const checks = [
  "event-sequence-gap",
  "aggregate-version-gap",
  "receipt-events-missing",
  "event-receipt-mismatch",
  "event-without-receipt",
  "receipt-effect-missing",
  "effect-without-receipt",
  "settlement-unheard",
  "transcript-invalid",
  "transcript-unreadable",
  "ledger-repeated",
  "ledger-unreadable"
] as const
export type CheckName = (typeof checks)[number]

export interface Problem {
  readonly check: CheckName
  /** What it is about: `events 5..7`, `receipt <id>`, `effect <id>`, `thread <id>`. */
  readonly subject: string
  readonly message: string
}

/**
 * Rows the engine's retention may have deleted (Retention.ts defaults, which the server uses):
 * receipts older than 30 days, settled effects not updated for 7 days. A reference to a row older
 * than that is not counted as missing.
 */
export const retention = { receiptsMs: 30 * 24 * 3_600_000, settledEffectsMs: 7 * 24 * 3_600_000 }

export interface Horizons {
  readonly receiptsBefore: number
  readonly settledEffectsBefore: number
}

export const horizonsAt = (now: number): Horizons => ({
  receiptsBefore: now - retention.receiptsMs,
  settledEffectsBefore: now - retention.settledEffectsMs
})

export interface Counts {
  readonly events: number
  readonly head: number
  readonly aggregates: number
  readonly receipts: number
  readonly effects: number
  readonly settledEffects: number
  /** null: the store has no transcripts (not the agents domain). */
  readonly transcripts: number | null
}

export interface CheckReport {
  readonly file: string
  readonly ok: boolean
  readonly counts: Counts
  /** The world directory whose ledger was checked; null when none was found or given. */
  readonly world: { readonly dir: string; readonly ledgerEntries: number } | null
  readonly problems: ReadonlyArray<Problem>
}

const page = 2_000

// ---- pure rules, one row at a time ------------------------------------------------------------

/** Holes in a run of ascending sequences, given the last one seen before this run. */
export const sequenceGaps = (previous: number, sequences: ReadonlyArray<number>): Array<Problem> => {
  const problems: Array<Problem> = []
  let last = previous
  for (const sequence of sequences) {
    if (sequence > last + 1) problems.push(gap(last + 1, sequence - 1))
    last = sequence
  }
  return problems
}

const gap = (from: number, to: number): Problem => ({
  check: "event-sequence-gap",
  subject: from === to ? `event ${from}` : `events ${from}..${to}`,
  message:
    from === to
      ? `sequence ${from} is missing from the event log`
      : `sequences ${from}..${to} are missing from the event log`
})

export interface ReceiptRow {
  readonly command_id: string
  readonly status: "accepted" | "rejected"
  readonly aggregate_type: string
  readonly aggregate_id: string
  readonly first_sequence: number | null
  readonly last_sequence: number
  readonly effect_ids: string
  readonly accepted_at: number
  readonly n: number
  readonly lo: number | null
  readonly hi: number | null
  readonly foreign_n: number
}

export const receiptProblems = (row: ReceiptRow, missingEffects: ReadonlyArray<string>): Array<Problem> => {
  const subject = `receipt ${row.command_id}`
  const problems: Array<Problem> = []
  if (row.status === "accepted" && row.first_sequence !== null) {
    const expected = row.last_sequence - row.first_sequence + 1
    if (row.n !== expected || row.lo !== row.first_sequence || row.hi !== row.last_sequence) {
      problems.push({
        check: "receipt-events-missing",
        subject,
        message:
          `accepted with events ${row.first_sequence}..${row.last_sequence}, but the log holds ${row.n} of its ${expected} event(s)` +
          (row.n === 0 ? "" : ` (${row.lo}..${row.hi})`)
      })
    }
  } else if (row.n > 0) {
    problems.push({
      check: "event-receipt-mismatch",
      subject,
      message:
        row.status === "rejected"
          ? `rejected, yet the log holds ${row.n} event(s) under its command id`
          : `accepted without events, yet the log holds ${row.n} event(s) under its command id`
    })
  }
  if (row.foreign_n > 0) {
    problems.push({
      check: "event-receipt-mismatch",
      subject,
      message: `${row.foreign_n} event(s) under its command id belong to another aggregate than ${row.aggregate_type}/${row.aggregate_id}`
    })
  }
  for (const effectId of missingEffects) {
    problems.push({
      check: "receipt-effect-missing",
      subject,
      message: `lists effect ${effectId}, which has no outbox row`
    })
  }
  return problems
}

export interface OutboxRow {
  readonly effect_id: string
  readonly command_id: string
  readonly status: string
  readonly attempts: number
  readonly aggregate_type: string
  readonly aggregate_id: string
  readonly created_at: number
  readonly updated_at: number
  /** The status of the deciding command's receipt, null when there is none. */
  readonly decided: string | null
  /** 1 when the settlement evidence exists (see the module comment). */
  readonly heard: number
}

const settled = new Set(["succeeded", "failed", "cancelled"])

export const outboxProblems = (row: OutboxRow, horizons: Horizons): Array<Problem> => {
  const subject = `effect ${row.effect_id}`
  const problems: Array<Problem> = []
  if (row.decided === null && row.created_at >= horizons.receiptsBefore) {
    problems.push({
      check: "effect-without-receipt",
      subject,
      message: `decided by command ${row.command_id}, which has no receipt`
    })
  } else if (row.decided === "rejected") {
    problems.push({
      check: "effect-without-receipt",
      subject,
      message: `decided by command ${row.command_id}, whose receipt is a rejection`
    })
  }
  if (settled.has(row.status) && row.heard === 0 && row.updated_at >= horizons.receiptsBefore) {
    const ids =
      row.status === "cancelled"
        ? `a command on ${row.aggregate_type}/${row.aggregate_id} accepted at ${row.updated_at}`
        : `${EffectOutcomes.outcomeId(row.effect_id, row.attempts)}, ${EffectOutcomes.reconcileId(row.effect_id, row.attempts)} or ${EffectOutcomes.reclaimId(row.effect_id, row.attempts)}`
    problems.push({
      check: "settlement-unheard",
      subject,
      message:
        `${row.status} at attempt ${row.attempts}, but no accepted receipt records the settlement (${ids}): ` +
        `its owner ${row.aggregate_type}/${row.aggregate_id} never heard the outcome`
    })
  }
  return problems
}

/** The agents domain's rules (transcripts, the ledger, the kinds' policies), loaded only when needed. */
export type TranscriptRules = Pick<
  typeof import("@orchestration/agents"),
  "Transcript" | "validateTranscript" | "World" | "Tools"
>

export const loadTranscriptRules: Effect.Effect<TranscriptRules> = Effect.promise(() => import("@orchestration/agents"))

export interface LedgerLine {
  readonly effectId: string
  readonly kind: string
  readonly attempt: number
  /** Present when the policy is decided per call (an MCP tool's): it wins over the kind's. */
  readonly onProcessLoss?: string | undefined
}

/** Pure: process-bound effect ids with more than one ledger line, each named once, in first-seen order. */
export const ledgerProblems = (
  entries: ReadonlyArray<LedgerLine>,
  isProcessBound: (kind: string, entry: LedgerLine) => boolean
): Array<Problem> => {
  const byEffect = new Map<string, Array<LedgerLine>>()
  for (const entry of entries) {
    if (!isProcessBound(entry.kind, entry)) continue
    const seen = byEffect.get(entry.effectId)
    if (seen === undefined) byEffect.set(entry.effectId, [entry])
    else seen.push(entry)
  }
  const problems: Array<Problem> = []
  for (const [effectId, lines] of byEffect) {
    if (lines.length < 2) continue
    problems.push({
      check: "ledger-repeated",
      subject: `effect ${effectId}`,
      message:
        `${lines.length} ledger entries (attempts ${lines.map((l) => l.attempt).join(", ")}) for one ${lines[0]!.kind} effect: ` +
        "a process-bound effect was performed more than once"
    })
  }
  return problems
}

/** Reads and checks `<world>/ledger.jsonl` (absent: no performance started yet). */
const checkLedger = (rules: TranscriptRules, worldDir: string) =>
  Effect.gen(function* () {
    const file = join(worldDir, "ledger.jsonl")
    const text = yield* Effect.try({
      try: () => readFileSync(file, "utf8"),
      catch: (error) => error as NodeJS.ErrnoException
    }).pipe(
      Effect.catchIf(
        (error) => error.code === "ENOENT",
        () => Effect.succeed("")
      )
    )
    const problems: Array<Problem> = []
    const entries: Array<LedgerLine> = []
    const decode = Schema.decodeUnknownEither(rules.World.LedgerEntry)
    text.split("\n").forEach((line, index) => {
      if (line.trim() === "") return
      let parsed: unknown
      try {
        parsed = JSON.parse(line)
      } catch {
        // swallow-ok: the parse failure is the finding, reported below
        parsed = undefined
      }
      const decoded = decode(parsed)
      if (Either.isLeft(decoded)) {
        problems.push({
          check: "ledger-unreadable",
          subject: `ledger line ${index + 1}`,
          message: `line ${index + 1} of ${file} is not a ledger entry`
        })
      } else {
        entries.push(decoded.right)
      }
    })
    const policies = rules.Tools.toolPolicies as Readonly<
      Record<string, { readonly onProcessLoss: unknown } | undefined>
    >
    problems.push(
      ...ledgerProblems(entries, (kind, entry) =>
        entry.onProcessLoss === undefined
          ? policies[kind]?.onProcessLoss === "process-bound"
          : entry.onProcessLoss === "process-bound"
      )
    )
    return { entries: entries.length, problems }
  })

/** One thread's transcript rows (position, JSON text), as the read model stores them. */
export const transcriptProblems = (
  rules: TranscriptRules,
  threadId: string,
  status: string,
  rows: ReadonlyArray<{ readonly position: number; readonly message: string }>
): Array<Problem> => {
  const subject = `thread ${threadId}`
  const problems: Array<Problem> = []
  const messages: Array<Transcript.TranscriptMessage> = []
  rows.forEach((row, index) => {
    if (row.position !== index + 1) {
      problems.push({
        check: "transcript-invalid",
        subject,
        message: `message position ${index + 1} is missing (the next one is ${row.position})`
      })
    }
    let parsed: unknown
    try {
      parsed = JSON.parse(row.message)
    } catch {
      // swallow-ok: the parse failure is the finding, reported on the next line
      parsed = undefined
    }
    const decoded = Schema.decodeUnknownEither(rules.Transcript.TranscriptMessage)(parsed)
    if (Either.isLeft(decoded)) {
      problems.push({
        check: "transcript-unreadable",
        subject,
        message: `message at position ${row.position} is not a transcript message`
      })
    } else {
      messages.push(decoded.right)
    }
  })
  const validation = rules.validateTranscript(messages, { allowTrailingOpenCalls: status === "running" })
  for (const problem of validation.problems) {
    problems.push({
      check: "transcript-invalid",
      subject,
      message: `${problem.code} at message ${problem.index + 1}: ${problem.message}`
    })
  }
  return problems
}

// ---- scanning the file ------------------------------------------------------------------------

const count = (store: StoreFile.Store, sql: string) => Number((store.prepare(sql).get() as { n: number }).n)

export const run = (
  store: StoreFile.Store,
  options: {
    readonly now: number
    readonly progress: (total: number) => Progress
    /** The agents domain's world directory, whose ledger is checked; undefined: none. */
    readonly worldDir?: string | undefined
  }
) =>
  Effect.gen(function* () {
    const horizons = horizonsAt(options.now)
    const read = <A>(doing: string, f: () => A) => StoreFile.read(store, doing, f)
    const hasTranscripts = StoreFile.hasTable(store, "agent_messages") && StoreFile.hasTable(store, "agent_threads")
    const totals = yield* read("counting rows of", () => ({
      events: count(store, "SELECT COUNT(*) AS n FROM events"),
      receipts: count(store, "SELECT COUNT(*) AS n FROM receipts"),
      effects: count(store, "SELECT COUNT(*) AS n FROM outbox"),
      settledEffects: count(
        store,
        "SELECT COUNT(*) AS n FROM outbox WHERE status IN ('succeeded', 'failed', 'cancelled')"
      ),
      threads: hasTranscripts ? count(store, "SELECT COUNT(*) AS n FROM agent_threads") : 0
    }))
    const progress = options.progress(totals.events + totals.receipts + totals.effects + totals.threads)
    const problems: Array<Problem> = []

    // Events: sequence holes, and commands without receipts (one pass, by sequence).
    const eventsPage = store.prepare(
      `SELECT e.sequence, e.command_id, e.occurred_at,
          EXISTS (SELECT 1 FROM receipts r WHERE r.command_id = e.command_id) AS has_receipt
        FROM events e WHERE e.sequence > ? ORDER BY e.sequence LIMIT ?`
    )
    let last = 0
    const orphaned = new Map<string, { from: number; to: number; n: number }>()
    while (true) {
      const rows = (yield* read("reading events of", () => eventsPage.all(last, page))) as Array<{
        sequence: number
        command_id: string
        occurred_at: number
        has_receipt: number
      }>
      if (rows.length === 0) break
      problems.push(
        ...sequenceGaps(
          last,
          rows.map((r) => Number(r.sequence))
        )
      )
      for (const row of rows) {
        if (row.has_receipt === 0 && row.occurred_at >= horizons.receiptsBefore) {
          const seen = orphaned.get(row.command_id)
          orphaned.set(
            row.command_id,
            seen === undefined
              ? { from: row.sequence, to: row.sequence, n: 1 }
              : { ...seen, to: row.sequence, n: seen.n + 1 }
          )
        }
      }
      last = Number(rows.at(-1)!.sequence)
      progress.advance(rows.length)
    }
    const head = yield* read("reading the sequence head of", () => {
      const row = StoreFile.hasTable(store, "sqlite_sequence")
        ? (store.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'events'").get() as { seq: number } | undefined)
        : undefined
      return Math.max(last, Number(row?.seq ?? 0))
    })
    if (head > last) problems.push(gap(last + 1, head))
    for (const [commandId, span] of orphaned) {
      problems.push({
        check: "event-without-receipt",
        subject: `command ${commandId}`,
        message: `${span.n} event(s) (${span.from}..${span.to}) were written by a command that has no receipt`
      })
    }

    const versions = (yield* read("reading aggregate versions of", () =>
      store
        .prepare(
          `SELECT aggregate_type, aggregate_id, COUNT(*) AS n, MIN(version) AS lo, MAX(version) AS hi
          FROM events GROUP BY aggregate_type, aggregate_id`
        )
        .all()
    )) as Array<{ aggregate_type: string; aggregate_id: string; n: number; lo: number; hi: number }>
    for (const v of versions) {
      if (v.lo !== 1 || v.hi !== v.n) {
        problems.push({
          check: "aggregate-version-gap",
          subject: `aggregate ${v.aggregate_type}/${v.aggregate_id}`,
          // Versions are unique per aggregate, so what is not there is missing.
          message: `holds ${v.n} event(s) with versions ${v.lo}..${v.hi}: ${v.hi - v.n} version(s) missing`
        })
      }
    }

    // Receipts: their events and their effects.
    const receiptsPage = store.prepare(
      `SELECT r.command_id, r.status, r.aggregate_type, r.aggregate_id, r.first_sequence, r.last_sequence, r.effect_ids, r.accepted_at,
          (SELECT COUNT(*) FROM events e WHERE e.command_id = r.command_id) AS n,
          (SELECT MIN(e.sequence) FROM events e WHERE e.command_id = r.command_id) AS lo,
          (SELECT MAX(e.sequence) FROM events e WHERE e.command_id = r.command_id) AS hi,
          (SELECT COUNT(*) FROM events e WHERE e.command_id = r.command_id
            AND (e.aggregate_type <> r.aggregate_type OR e.aggregate_id <> r.aggregate_id)) AS foreign_n
        FROM receipts r WHERE r.command_id > ? ORDER BY r.command_id LIMIT ?`
    )
    const effectExists = store.prepare("SELECT 1 FROM outbox WHERE effect_id = ?")
    let after = ""
    while (true) {
      const rows = (yield* read("reading receipts of", () => receiptsPage.all(after, page))) as Array<ReceiptRow>
      if (rows.length === 0) break
      for (const row of rows) {
        const listed =
          row.status === "accepted" && row.accepted_at >= horizons.settledEffectsBefore ? parseIds(row.effect_ids) : []
        const missing = yield* read("reading effects of", () =>
          listed.filter((id) => effectExists.get(id) === undefined)
        )
        problems.push(...receiptProblems(row, missing))
      }
      after = rows.at(-1)!.command_id
      progress.advance(rows.length)
    }

    // Outbox rows: their deciding receipt and, once settled, the evidence the owner heard it.
    const outboxPage = store.prepare(
      `SELECT o.sequence, o.effect_id, o.command_id, o.status, o.attempts, o.aggregate_type, o.aggregate_id, o.created_at, o.updated_at,
          (SELECT r.status FROM receipts r WHERE r.command_id = o.command_id) AS decided,
          CASE
            WHEN o.status NOT IN ('succeeded', 'failed', 'cancelled') THEN 1
            -- The settlement's own ids first: primary-key lookups.
            WHEN EXISTS (
              SELECT 1 FROM receipts r
              WHERE r.command_id IN ('outcome:' || o.effect_id || '#' || o.attempts, 'reconcile:' || o.effect_id || '#' || o.attempts,
                  'reclaim:' || o.effect_id || '#' || o.attempts)
                -- The unary + keeps SQLite on the primary key (the time index would scan a busy millisecond).
                AND r.status = 'accepted' AND +r.accepted_at = o.updated_at
                AND r.aggregate_type = o.aggregate_type AND r.aggregate_id = o.aggregate_id
            ) THEN 1
            -- A cancel (an operator's, under the default id or their own, or the aggregate's decision): by time.
            WHEN o.status = 'cancelled' THEN EXISTS (
              SELECT 1 FROM receipts r
              WHERE r.accepted_at = o.updated_at AND r.status = 'accepted'
                AND r.aggregate_type = o.aggregate_type AND r.aggregate_id = o.aggregate_id
            )
            ELSE 0
          END AS heard
        FROM outbox o WHERE o.sequence > ? ORDER BY o.sequence LIMIT ?`
    )
    let sequence = 0
    while (true) {
      const rows = (yield* read("reading the outbox of", () => outboxPage.all(sequence, page))) as Array<
        OutboxRow & { sequence: number }
      >
      if (rows.length === 0) break
      for (const row of rows) problems.push(...outboxProblems(row, horizons))
      sequence = Number(rows.at(-1)!.sequence)
      progress.advance(rows.length)
    }

    // Transcripts, thread by thread.
    if (hasTranscripts) {
      const rules = yield* loadTranscriptRules
      const threadsPage = store.prepare(
        "SELECT thread_id, status FROM agent_threads WHERE thread_id > ? ORDER BY thread_id LIMIT ?"
      )
      const messagesOf = store.prepare(
        "SELECT position, message FROM agent_messages WHERE thread_id = ? ORDER BY position"
      )
      let thread = ""
      while (true) {
        const rows = (yield* read("reading threads of", () => threadsPage.all(thread, page))) as Array<{
          thread_id: string
          status: string
        }>
        if (rows.length === 0) break
        for (const row of rows) {
          const messages = (yield* read("reading a transcript of", () => messagesOf.all(row.thread_id))) as Array<{
            position: number
            message: string
          }>
          problems.push(...transcriptProblems(rules, row.thread_id, row.status, messages))
        }
        thread = rows.at(-1)!.thread_id
        progress.advance(rows.length)
      }
    }
    progress.finish()

    let world: CheckReport["world"] = null
    if (options.worldDir !== undefined) {
      const rules = yield* loadTranscriptRules
      const ledger = yield* checkLedger(rules, options.worldDir).pipe(
        Effect.mapError((error) => StoreFile.failure(join(options.worldDir!, "ledger.jsonl"), "reading")(error))
      )
      problems.push(...ledger.problems)
      world = { dir: options.worldDir, ledgerEntries: ledger.entries }
    }

    const report: CheckReport = {
      file: store.name,
      ok: problems.length === 0,
      counts: {
        events: totals.events,
        head,
        aggregates: versions.length,
        receipts: totals.receipts,
        effects: totals.effects,
        settledEffects: totals.settledEffects,
        transcripts: hasTranscripts ? totals.threads : null
      },
      world,
      problems
    }
    return report
  })

const parseIds = (json: string): Array<string> => {
  try {
    const ids = JSON.parse(json) as unknown
    return Array.isArray(ids) ? ids.filter((id): id is string => typeof id === "string") : []
  } catch {
    // swallow-ok: a receipt whose effect list is not JSON lists nothing checkable; the engine writes it as JSON
    return []
  }
}
