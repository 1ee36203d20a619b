/**
 * The store's invariants as pure rules over rows the audit (Audit.ts) reads: each takes what one
 * query answered for one row and names what is wrong with it, without I/O, so each rule is tested
 * alone. What the rules are, and why they hold, is stated once in Audit.ts.
 */
import * as EffectOutcomes from "./EffectOutcomes.js"

export const auditChecks = [
  "event-sequence-gap",
  "aggregate-version-gap",
  "receipt-events-missing",
  "event-receipt-mismatch",
  "event-without-receipt",
  "receipt-effect-missing",
  "effect-without-receipt",
  "settlement-unheard"
] as const
export type AuditCheck = (typeof auditChecks)[number]

export interface Finding<Check extends string = AuditCheck> {
  readonly check: Check
  /** What it is about: `events 5..7`, `receipt <id>`, `effect <id>`, `aggregate <type>/<id>`. */
  readonly subject: string
  readonly message: string
}

/** Moments before which a row may have been pruned by retention (Retention.horizonsAt). */
export interface Horizons {
  readonly receiptsBefore: number
  readonly settledEffectsBefore: number
}

/** A run of missing sequences. */
export const gap = (from: number, to: number): Finding => ({
  check: "event-sequence-gap",
  subject: from === to ? `event ${from}` : `events ${from}..${to}`,
  message:
    from === to
      ? `sequence ${from} is missing from the event log`
      : `sequences ${from}..${to} are missing from the event log`
})

/** Holes in a run of ascending sequences, given the last one seen before this run. */
export const sequenceGaps = (previous: number, sequences: ReadonlyArray<number>): Array<Finding> => {
  const findings: Array<Finding> = []
  let last = previous
  for (const sequence of sequences) {
    if (sequence > last + 1) findings.push(gap(last + 1, sequence - 1))
    last = sequence
  }
  return findings
}

/** One aggregate's events: how many, and their lowest and highest version. */
export interface AggregateVersions {
  readonly aggregate_type: string
  readonly aggregate_id: string
  readonly n: number
  readonly lo: number
  readonly hi: number
}

export const versionProblems = (v: AggregateVersions): Array<Finding> =>
  v.lo === 1 && v.hi === v.n
    ? []
    : [
        {
          check: "aggregate-version-gap",
          subject: `aggregate ${v.aggregate_type}/${v.aggregate_id}`,
          // Versions are unique per aggregate, so what is not there is missing.
          message: `holds ${v.n} event(s) with versions ${v.lo}..${v.hi}: ${v.hi - v.n} version(s) missing`
        }
      ]

/** Events of one command that has no receipt: how many, first and last sequence. */
export const eventsWithoutReceipt = (
  commandId: string,
  span: { readonly from: number; readonly to: number; readonly n: number }
): Finding => ({
  check: "event-without-receipt",
  subject: `command ${commandId}`,
  message: `${span.n} event(s) (${span.from}..${span.to}) were written by a command that has no receipt`
})

/** A receipt, with what the log holds under its command id. */
export interface ReceiptRow {
  readonly command_id: string
  readonly status: "accepted" | "rejected"
  readonly aggregate_type: string
  readonly aggregate_id: string
  readonly first_sequence: number | null
  readonly last_sequence: number
  readonly effect_ids: string
  readonly accepted_at: number
  /** Events under its command id: how many, the lowest and highest sequence. */
  readonly n: number
  readonly lo: number | null
  readonly hi: number | null
  /** Events under its command id on another aggregate. */
  readonly foreign_n: number
}

export const receiptProblems = (row: ReceiptRow, missingEffects: ReadonlyArray<string>): Array<Finding> => {
  const subject = `receipt ${row.command_id}`
  const findings: Array<Finding> = []
  if (row.status === "accepted" && row.first_sequence !== null) {
    const expected = row.last_sequence - row.first_sequence + 1
    if (row.n !== expected || row.lo !== row.first_sequence || row.hi !== row.last_sequence) {
      findings.push({
        check: "receipt-events-missing",
        subject,
        message:
          `accepted with events ${row.first_sequence}..${row.last_sequence}, but the log holds ${row.n} of its ${expected} event(s)` +
          (row.n === 0 ? "" : ` (${row.lo}..${row.hi})`)
      })
    }
  } else if (row.n > 0) {
    findings.push({
      check: "event-receipt-mismatch",
      subject,
      message:
        row.status === "rejected"
          ? `rejected, yet the log holds ${row.n} event(s) under its command id`
          : `accepted without events, yet the log holds ${row.n} event(s) under its command id`
    })
  }
  if (row.foreign_n > 0) {
    findings.push({
      check: "event-receipt-mismatch",
      subject,
      message: `${row.foreign_n} event(s) under its command id belong to another aggregate than ${row.aggregate_type}/${row.aggregate_id}`
    })
  }
  for (const effectId of missingEffects) {
    findings.push({
      check: "receipt-effect-missing",
      subject,
      message: `lists effect ${effectId}, which has no outbox row`
    })
  }
  return findings
}

/** The effect ids an accepted receipt lists that must still have rows (younger than the settled-effects period). */
export const listedEffects = (row: ReceiptRow, horizons: Horizons): Array<string> =>
  row.status === "accepted" && row.accepted_at >= horizons.settledEffectsBefore ? parseIds(row.effect_ids) : []

const parseIds = (json: string): Array<string> => {
  try {
    const ids = JSON.parse(json) as unknown
    return Array.isArray(ids) ? ids.filter((id): id is string => typeof id === "string") : []
  } catch {
    // swallow-ok: a receipt whose effect list is not JSON lists nothing checkable; the engine writes it as JSON
    return []
  }
}

/** An outbox row, with its deciding command's receipt status and the evidence its owner heard it. */
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
  /** 1 when the settlement evidence exists (see Audit.ts). */
  readonly heard: number
}

export const settledStatuses = ["succeeded", "failed", "cancelled"] as const
const settled = new Set<string>(settledStatuses)

export const outboxProblems = (row: OutboxRow, horizons: Horizons): Array<Finding> => {
  const subject = `effect ${row.effect_id}`
  const findings: Array<Finding> = []
  if (row.decided === null && row.created_at >= horizons.receiptsBefore) {
    findings.push({
      check: "effect-without-receipt",
      subject,
      message: `decided by command ${row.command_id}, which has no receipt`
    })
  } else if (row.decided === "rejected") {
    findings.push({
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
    findings.push({
      check: "settlement-unheard",
      subject,
      message:
        `${row.status} at attempt ${row.attempts}, but no accepted receipt records the settlement (${ids}): ` +
        `its owner ${row.aggregate_type}/${row.aggregate_id} never heard the outcome`
    })
  }
  return findings
}
