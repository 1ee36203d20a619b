/**
 * `db check`: the engine's audit (Audit in @orchestration/engine, where each invariant is stated)
 * over the SQLite file, plus the agents domain's own rules, which the engine does not know:
 *
 * - `transcript-invalid` / `transcript-unreadable`: every thread's transcript passes
 *   validateTranscript, with positions 1..n; open calls at the end are allowed only while the
 *   thread is running, as GET /v1/threads/:id/transcript does.
 * - `ledger-repeated` / `ledger-unreadable` (when the world directory is found): the world's
 *   `ledger.jsonl` gets a line before every performance starts, so two lines for one effect id of a
 *   process-bound effect (tool.execute; a tool.mcp_call line carries its own policy) mean it was performed twice, which that policy
 *   forbids. Replay-safe kinds may repeat.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import type { Transcript } from "@orchestration/agents"
import { Audit, AuditFindings } from "@orchestration/engine"
import { Effect, Either, Schema } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import type { Progress } from "../Progress.js"
import * as StoreFile from "./StoreFile.js"

export const checks = [
  ...AuditFindings.auditChecks,
  "transcript-invalid",
  "transcript-unreadable",
  "ledger-repeated",
  "ledger-unreadable"
] as const
export type CheckName = (typeof checks)[number]

export type Problem = AuditFindings.Finding<CheckName>

export interface Counts extends Audit.Counts {
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

/** The file's text; "" when it does not exist (a ledger is absent until the first performance). */
const readIfPresent = (file: string): string => {
  try {
    return readFileSync(file, "utf8")
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return ""
    throw error
  }
}

/** Reads and checks `<world>/ledger.jsonl` (absent: no performance started yet). */
const checkLedger = (rules: TranscriptRules, worldDir: string) =>
  Effect.gen(function* () {
    const file = join(worldDir, "ledger.jsonl")
    const text = yield* Effect.try({ try: () => readIfPresent(file), catch: StoreFile.failure(file, "reading") })
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

/**
 * Checks the store the client reads (the CLI's: a SQLite file held in one read transaction), the
 * engine's invariants first, then the transcripts, then the world's ledger.
 */
export const run = (options: {
  readonly file: string
  readonly now: number
  readonly progress: (total: number) => Progress
  /** The agents domain's world directory, whose ledger is checked; undefined: none. */
  readonly worldDir?: string | undefined
}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const tables = yield* sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table'
      AND name IN ('agent_messages', 'agent_threads')`
    const hasTranscripts = tables.length === 2
    const totals = yield* Audit.totals
    const [threads] = hasTranscripts ? yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM agent_threads` : []
    const threadCount = Number(threads?.n ?? 0)
    const progress = options.progress(totals.events + totals.receipts + totals.effects + threadCount)
    const audit = yield* Audit.run({ now: options.now, totals, advance: (n) => progress.advance(n) })
    const problems: Array<Problem> = [...audit.findings]
    if (hasTranscripts) problems.push(...(yield* checkTranscripts((n) => progress.advance(n))))
    progress.finish()

    let world: CheckReport["world"] = null
    if (options.worldDir !== undefined) {
      const rules = yield* loadTranscriptRules
      const ledger = yield* checkLedger(rules, options.worldDir)
      problems.push(...ledger.problems)
      world = { dir: options.worldDir, ledgerEntries: ledger.entries }
    }

    const c = audit.counts
    const report: CheckReport = {
      file: options.file,
      ok: problems.length === 0,
      counts: {
        events: c.events,
        head: c.head,
        aggregates: c.aggregates,
        receipts: c.receipts,
        effects: c.effects,
        settledEffects: c.settledEffects,
        transcripts: hasTranscripts ? threadCount : null
      },
      world,
      problems
    }
    return report
  })

/** Every thread's transcript, thread by thread. */
const checkTranscripts = (advance: (rows: number) => void) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const rules = yield* loadTranscriptRules
    const problems: Array<Problem> = []
    let thread = ""
    while (true) {
      const rows = yield* sql<{ thread_id: string; status: string }>`SELECT thread_id, status FROM agent_threads
        WHERE thread_id > ${thread} ORDER BY thread_id LIMIT ${page}`
      if (rows.length === 0) break
      for (const row of rows) {
        const messages = yield* sql<{ position: number; message: string }>`SELECT position, message FROM agent_messages
          WHERE thread_id = ${row.thread_id} ORDER BY position`
        problems.push(...transcriptProblems(rules, row.thread_id, row.status, messages))
      }
      thread = rows.at(-1)!.thread_id
      advance(rows.length)
    }
    return problems
  })
