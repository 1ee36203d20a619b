/**
 * What a parked outbox row keeps in its `quarantine` column (Quarantine.ts parks and releases rows):
 * one schema, so the record the engine writes is the record its readers check a stored one against.
 */
import { Schema } from "effect"
import { SettledBy } from "./EffectOutcomes.js"

/**
 * Closed: the per-aggregate problems that park a row instead of stopping the node, and
 * `settlement-defect`: the engine could take neither a reactor's outcome nor the failure recorded in
 * its place (it refused them as invalid, or died on them). Parked, not left running under its live owner.
 */
export const QuarantineReason = Schema.Literal(
  "aggregate-unavailable",
  "aggregate-unregistered",
  "command-defect",
  "settlement-defect"
)
export type QuarantineReason = typeof QuarantineReason.Type

/** Why, who parked it, and the settlement it could not record. */
export const QuarantineRecord = Schema.Struct({
  reason: QuarantineReason,
  message: Schema.String,
  by: SettledBy,
  at: Schema.Number,
  /** The settlement command, as dispatched; a release dispatches it again (same id, same payload). */
  settlement: Schema.Record({ key: Schema.String, value: Schema.Unknown })
})
export type QuarantineRecord = typeof QuarantineRecord.Type
