/**
 * Settling an effect is a command like any other: it goes through the front door, gets a receipt,
 * and commits the outbox row's new status together with what the owning aggregate records about it.
 * This module holds the engine's internal command types for that (reserved: clients cannot send
 * them), the outcome an aggregate is told, and the pure rule that checks a settlement against the
 * row it targets, so a settle that lost its lease changes nothing.
 */
import { Schema } from "effect"

/** Why a row is being settled: who is speaking. */
export const SettledBy = Schema.Literal("reactor", "timeout", "reconcile", "reclaim", "operator", "storage")
export type SettledBy = typeof SettledBy.Type

export const EffectError = Schema.Struct({
  message: Schema.String,
  code: Schema.optional(Schema.String)
})
export type EffectError = typeof EffectError.Type

const settlementFields = {
  commandId: Schema.String,
  effectId: Schema.String,
  /** The attempt this settlement is about; a row at another attempt makes it stale. */
  attempt: Schema.Number,
  aggregateType: Schema.String,
  aggregateId: Schema.String,
  by: SettledBy
}

/** The effect was performed; `response` is what it answered. */
export const EffectSucceed = Schema.Struct({ type: Schema.Literal("effect.succeed"), ...settlementFields, response: Schema.Unknown })
/** The effect failed. With `retryAt` the row goes back to pending until then; without, it is final. */
export const EffectFail = Schema.Struct({
  type: Schema.Literal("effect.fail"),
  ...settlementFields,
  error: EffectError,
  retryAt: Schema.optional(Schema.Number)
})
/** A replay-safe row whose owner is gone goes back to pending, with the reason stored. */
export const EffectRequeue = Schema.Struct({ type: Schema.Literal("effect.requeue"), ...settlementFields, reason: Schema.String })

/** An operator sends a failed or cancelled row back to pending, to be performed again. */
export const EffectRetry = Schema.Struct({ type: Schema.Literal("effect.retry"), ...settlementFields, reason: Schema.optional(Schema.String) })
/**
 * An operator cancels a row. A pending row will not run; a running one is marked cancelled and its
 * late outcome is stale (the performance itself may still finish: cancel cannot unsend a request).
 */
export const EffectCancel = Schema.Struct({ type: Schema.Literal("effect.cancel"), ...settlementFields, reason: Schema.optional(Schema.String) })

export const SettlementCommand = Schema.Union(EffectSucceed, EffectFail, EffectRequeue, EffectRetry, EffectCancel)
export type SettlementCommand = typeof SettlementCommand.Type

export const settlementSchemas = {
  "effect.succeed": EffectSucceed,
  "effect.fail": EffectFail,
  "effect.requeue": EffectRequeue,
  "effect.retry": EffectRetry,
  "effect.cancel": EffectCancel
} as const

/** What the owning aggregate is told when one of its effects changes state. */
export interface EffectOutcome {
  readonly effectId: string
  readonly kind: string
  /** The intent's payload, as decided. */
  readonly payload: unknown
  readonly attempt: number
  readonly status: "succeeded" | "failed" | "retrying" | "requeued" | "cancelled"
  readonly response?: unknown
  readonly error?: EffectError
  readonly by: SettledBy
}

/** The row as the settlement rule needs it. */
export interface SettlementTarget {
  readonly effectId: string
  readonly kind: string
  readonly aggregateType: string
  readonly aggregateId: string
  readonly status: string
  readonly attempts: number
  readonly payload: unknown
}

export interface RowChange {
  readonly status: "pending" | "succeeded" | "failed" | "cancelled"
  readonly availableAt?: number
  readonly response?: string | null
  readonly error?: string | null
}

export type SettlementDecision =
  | { readonly _tag: "Stale"; readonly message: string }
  | { readonly _tag: "Apply"; readonly change: RowChange; readonly outcome: EffectOutcome }

/** Pure: does this settlement apply to the row as it is now, and what does it change? */
export const decideSettlement = (
  row: SettlementTarget | undefined,
  command: SettlementCommand,
  now: number
): SettlementDecision => {
  if (row === undefined) return { _tag: "Stale", message: `no effect '${command.effectId}' exists` }
  if (row.aggregateType !== command.aggregateType || row.aggregateId !== command.aggregateId) {
    return { _tag: "Stale", message: `effect '${command.effectId}' belongs to ${row.aggregateType} '${row.aggregateId}'` }
  }
  const base = { effectId: row.effectId, kind: row.kind, payload: row.payload, attempt: row.attempts, by: command.by }
  if (command.type === "effect.retry" || command.type === "effect.cancel") {
    // Operators act on what they saw: the attempt count guards against acting on a row that moved on.
    if (row.attempts !== command.attempt) {
      return { _tag: "Stale", message: `effect '${command.effectId}' is at attempt ${row.attempts}, not ${command.attempt}` }
    }
    const reason = command.reason ?? `${command.type === "effect.retry" ? "retried" : "cancelled"} by an operator`
    if (command.type === "effect.retry") {
      if (row.status !== "failed" && row.status !== "cancelled") {
        return { _tag: "Stale", message: `effect '${command.effectId}' is ${row.status}; only failed or cancelled effects can be retried` }
      }
      return {
        _tag: "Apply",
        change: { status: "pending", availableAt: now },
        outcome: { ...base, status: "retrying", error: { message: reason } }
      }
    }
    if (row.status !== "pending" && row.status !== "running") {
      return { _tag: "Stale", message: `effect '${command.effectId}' is already ${row.status}` }
    }
    return {
      _tag: "Apply",
      change: { status: "cancelled", error: JSON.stringify({ message: reason }) },
      outcome: { ...base, status: "cancelled", error: { message: reason } }
    }
  }
  // A quarantined row is a running row whose settlement is parked: releasing it settles that attempt.
  if ((row.status !== "running" && row.status !== "quarantined") || row.attempts !== command.attempt) {
    return {
      _tag: "Stale",
      message: `effect '${command.effectId}' is ${row.status} at attempt ${row.attempts}; this settles attempt ${command.attempt}`
    }
  }
  switch (command.type) {
    case "effect.succeed":
      return {
        _tag: "Apply",
        change: { status: "succeeded", response: JSON.stringify(command.response ?? null), error: null },
        outcome: { ...base, status: "succeeded", response: command.response }
      }
    case "effect.fail":
      return command.retryAt !== undefined
        ? {
          _tag: "Apply",
          change: { status: "pending", availableAt: command.retryAt, error: JSON.stringify(command.error) },
          outcome: { ...base, status: "retrying", error: command.error }
        }
        : {
          _tag: "Apply",
          change: { status: "failed", error: JSON.stringify(command.error) },
          outcome: { ...base, status: "failed", error: command.error }
        }
    case "effect.requeue":
      return {
        _tag: "Apply",
        change: { status: "pending", availableAt: now, error: JSON.stringify({ message: command.reason }) },
        outcome: { ...base, status: "requeued", error: { message: command.reason } }
      }
  }
}

/** Deterministic ids: a retried settle of one attempt is always the same command. */
export const outcomeId = (effectId: string, attempt: number) => `outcome:${effectId}#${attempt}`
/**
 * Boot reconcile and a live reactor's reclaim of a dead owner's row may both settle one attempt, with
 * different payloads (`by`, reason). Each has its own id, so the second is answered as stale (the row
 * moved on), never as a conflict of one id with two payloads.
 */
export const reconcileId = (effectId: string, attempt: number) => `reconcile:${effectId}#${attempt}`
export const reclaimId = (effectId: string, attempt: number) => `reclaim:${effectId}#${attempt}`
export const operatorId = (action: "retry" | "cancel", effectId: string, attempt: number) => `operator:${action}:${effectId}#${attempt}`
