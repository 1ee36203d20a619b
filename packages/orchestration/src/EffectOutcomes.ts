/**
 * Settling an effect is a command like any other: it goes through the front door, gets a receipt,
 * and commits the outbox row's new status together with what the owning aggregate records about it.
 * This module holds the engine's internal command types for that (reserved: clients cannot send
 * them), the outcome an aggregate is told, and the pure rule that checks a settlement against the
 * row it targets, so a settle that lost its lease changes nothing.
 */
import { Option, Schema } from "effect"
import type { EffectActionRefusal } from "./Errors.js"

/** Why a row is being settled: who is speaking. */
export const SettledBy = Schema.Literal("reactor", "timeout", "reconcile", "reclaim", "operator", "storage")
export type SettledBy = typeof SettledBy.Type

/**
 * Why an effect failed, or why its row moved, as a closed set the engine produces and domains match
 * exhaustively (never by the text of a message):
 * - `storage`: the store refused to record it (the outcome, or a write the handler needed); `code`
 *   holds the driver's code (`SQLITE_FULL`, `53100`, `ENOSPC`, ...).
 * - `process-lost`: the process performing it ended mid-performance (boot reconcile, dead-owner
 *   reclaim); it may or may not have taken effect.
 * - `timeout`: the handler ran past its kind's timeout and was interrupted.
 * - `cancelled`: an operator or its domain cancelled it.
 * - `handler`: the handler said it failed (an `EffectFailure`); `code` is the handler's own.
 * - `defect`: the handler died unexpectedly, or its outcome could not be recorded.
 * - `operator`: an operator acted on the row (a retry, a failure out of quarantine).
 */
const failureReasons = ["storage", "process-lost", "timeout", "cancelled", "handler", "defect", "operator"] as const
export const FailureReason = Schema.Literal(...failureReasons)
export type FailureReason = typeof FailureReason.Type

/**
 * The codes boot reconcile (`process-ended`) and the reactors' dead-owner reclaim (`owner-lost`)
 * store with the reason `process-lost` when they fail a process-bound row: its process ended
 * mid-performance, so the effect may or may not have taken effect. An operator retry of such a row
 * is refused: a process-bound effect is never performed twice. Running it again is new work,
 * decided by its domain under a new id.
 */
export const processLossCodes: ReadonlyArray<string> = ["process-ended", "owner-lost"]

/**
 * The code the reactor stores on a process-bound row whose performance succeeded but whose outcome
 * could not be recorded (the store refused it: reason `storage`; the aggregate could not take it:
 * reason `defect`). A failed performance keeps its code, and may be retried as a recorded failure may. The effect took place, so an operator retry is refused as for a process loss:
 * a process-bound effect is never performed twice. A replay-safe row keeps its own code and may be
 * retried.
 */
export const performedNotRecorded = "performed-not-recorded"

/** Driver codes of a full disk or a refused store, as rows written before `reason` existed hold them. */
const legacyStorageCode = (code: string) => code.startsWith("SQLITE_") || code === "53100" || code === "ENOSPC"

/**
 * Pure: the reason of a failure stored before failures carried one (only `message` and `code`).
 * The engine's own codes name theirs; a driver's code or the reactor's `storage:` note is the
 * store's; anything else was said by a handler.
 */
export const legacyReason = (error: {
  readonly message: string
  readonly code?: string | undefined
}): FailureReason => {
  const code = error.code ?? ""
  if (processLossCodes.includes(code)) return "process-lost"
  if (code === "timeout") return "timeout"
  if (code === "defect" || code === "outcome-not-recorded") return "defect"
  if (code === "failed-by-operator") return "operator"
  if (legacyStorageCode(code) || error.message.startsWith("storage:")) return "storage"
  return "handler"
}

const StoredEffectError = Schema.Struct({
  message: Schema.String,
  code: Schema.optional(Schema.String),
  reason: Schema.optional(FailureReason)
})

/**
 * A failure as outcomes carry it: always with its `reason`. Stored failures written before reasons
 * existed decode too, their reason read from their code (legacyReason).
 */
export const EffectError = Schema.transform(
  StoredEffectError,
  Schema.Struct({ message: Schema.String, code: Schema.optional(Schema.String), reason: FailureReason }),
  {
    strict: true,
    decode: (stored) => ({ ...stored, reason: stored.reason ?? legacyReason(stored) }),
    encode: (error) => error
  }
)
export type EffectError = typeof EffectError.Type

const decodeStoredError = Schema.decodeUnknownOption(EffectError)

/**
 * Pure: the reason of a row's stored `error` (parsed JSON), old or new; undefined when the row
 * holds no failure.
 */
export const storedFailureReason = (error: unknown): FailureReason | undefined => {
  return Option.getOrUndefined(decodeStoredError(error))?.reason
}

const targetFields = {
  commandId: Schema.String,
  effectId: Schema.String,
  aggregateType: Schema.String,
  aggregateId: Schema.String,
  by: SettledBy
}

const settlementFields = {
  ...targetFields,
  /** The attempt this settlement is about; a row at another attempt makes it stale. */
  attempt: Schema.Number
}

/**
 * An operator's command holds what the operator sent, never the row's state, so the same request
 * under the same id always has the same fingerprint. `attempt` is an optional guard for a caller
 * that acts on an attempt it saw; without it the action applies to the row as it is when decided.
 */
const operatorFields = {
  ...targetFields,
  attempt: Schema.optional(Schema.Number),
  reason: Schema.optional(Schema.String)
}

/** The effect was performed; `response` is what it answered. */
export const EffectSucceed = Schema.Struct({
  type: Schema.Literal("effect.succeed"),
  ...settlementFields,
  response: Schema.Unknown
})
/** The effect failed. With `retryAt` the row goes back to pending until then; without, it is final. */
export const EffectFail = Schema.Struct({
  type: Schema.Literal("effect.fail"),
  ...settlementFields,
  error: EffectError,
  retryAt: Schema.optional(Schema.Number)
})
/** A replay-safe row whose owner is gone goes back to pending, with the reason stored. */
export const EffectRequeue = Schema.Struct({
  type: Schema.Literal("effect.requeue"),
  ...settlementFields,
  reason: Schema.String
})

/** An operator sends a failed or cancelled row back to pending, to be performed again. */
export const EffectRetry = Schema.Struct({ type: Schema.Literal("effect.retry"), ...operatorFields })
/**
 * An operator cancels a row. A pending row will not run; a running one is marked cancelled and its
 * late outcome is stale. The performance itself may still be running (cancel cannot unsend a
 * request): the row keeps its lease owner until that owner says its handler stopped.
 */
export const EffectCancel = Schema.Struct({ type: Schema.Literal("effect.cancel"), ...operatorFields })
export type OperatorCommand = typeof EffectRetry.Type | typeof EffectCancel.Type

/** The keys `EffectRequeue` and `EffectSucceed` allow (their fields): any other key is refused by their schemas. */
const requeueKeys = new Set(Object.keys(EffectRequeue.fields))
const succeedKeys = new Set(Object.keys(EffectSucceed.fields))
const isSettledBy = Schema.is(SettledBy)

/**
 * The engine's own settlements come by the thousand (boot reconcile's requeues, reactors'
 * outcomes), and the Schema decoder's walk was most of routing one. A plain check of the object
 * gives the decoded command for the two that come most: it accepts only what `EffectRequeue` or
 * `EffectSucceed` accepts (no other key, every field there with its type); anything else answers
 * undefined, and the router decodes that value with the schema, which says what is wrong.
 */
export const decodeSettlementQuickly = (
  raw: Record<string, unknown>
): typeof EffectRequeue.Type | typeof EffectSucceed.Type | undefined => {
  const keys = raw.type === "effect.requeue" ? requeueKeys : raw.type === "effect.succeed" ? succeedKeys : undefined
  if (keys === undefined) return undefined
  for (const key in raw) if (!keys.has(key)) return undefined
  if (
    typeof raw.commandId !== "string" ||
    typeof raw.effectId !== "string" ||
    typeof raw.aggregateType !== "string" ||
    typeof raw.aggregateId !== "string" ||
    typeof raw.attempt !== "number" ||
    !isSettledBy(raw.by) ||
    (raw.type === "effect.requeue" ? typeof raw.reason !== "string" : !("response" in raw))
  ) {
    return undefined
  }
  return raw as unknown as typeof EffectRequeue.Type | typeof EffectSucceed.Type
}

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
  readonly error: unknown
  /** Who holds (or, on a cancelled row, last held) the lease; null once released or settled. */
  readonly leaseOwner: string | null
  readonly leaseExpiresAt: number | null
  /** The lease owner's heartbeat row; undefined when it has none (or for non-operator settlements). */
  readonly leaseHolder?: { readonly heartbeatAt: number; readonly stoppedAt: number | null } | undefined
  /** Operator actions applied to this row so far; part of the default operator command id. */
  readonly operatorActions: number
}

export interface RowChange {
  readonly status: "pending" | "succeeded" | "failed" | "cancelled"
  readonly availableAt?: number
  readonly response?: string | null
  readonly error?: string | null
  /** A cancelled running row keeps its lease owner: that performance has not stopped yet. */
  readonly keepLease?: boolean
  /** An operator's action: counted on the row (see operatorId). */
  readonly operatorAction?: boolean
}

export type SettlementDecision =
  | { readonly _tag: "Stale"; readonly message: string }
  | { readonly _tag: "Refused"; readonly reason: EffectActionRefusal; readonly message: string }
  | { readonly _tag: "Apply"; readonly change: RowChange; readonly outcome: EffectOutcome }

/**
 * Pure: may an earlier performance of this row still be running? A performer holds the row's lease
 * while its handler runs, and a cancel leaves the lease in place; the owner clears it once its
 * handler stopped (it learns of the cancel within moments, see CancelWatch). Without that word the
 * performance is over only when its owner is: stopped, or dead by the reclaim rule (its lease ran
 * out and it has not beaten its heart since the lease was last renewed), or silent for
 * `holderSilenceMs`. The last is for an owner that beat on after the lease ran out (a cancelled row's
 * lease is not renewed, and its handler was slow to stop) and then died unmarked (SIGKILL): by the
 * lease alone it beat "since", and the row could never be retried.
 */
export const performanceMayBeRunning = (row: SettlementTarget, now: number): boolean => {
  if (row.status === "running") return true
  if (row.leaseOwner === null) return false
  const holder = row.leaseHolder
  if (holder === undefined || holder.stoppedAt !== null) return false
  if (holder.heartbeatAt < now - holderSilenceMs) return false
  const expired = row.leaseExpiresAt !== null && row.leaseExpiresAt < now
  return !(expired && holder.heartbeatAt <= row.leaseExpiresAt!)
}

/**
 * How long an owner may be silent and still be stopping a cancelled handler: far above any owner's
 * heartbeat period and the reactors' dead-after (10 s by default), so only a dead owner is this silent.
 */
export const holderSilenceMs = 10 * 60_000

/** Pure: does an operator's retry or cancel apply to the row as it is now, and what does it change? */
export const decideOperatorAction = (
  row: SettlementTarget | undefined,
  command: OperatorCommand,
  now: number
): SettlementDecision => {
  const action = command.type === "effect.retry" ? "retry" : "cancel"
  if (row === undefined || row.aggregateType !== command.aggregateType || row.aggregateId !== command.aggregateId) {
    return {
      _tag: "Refused",
      reason: "no-such-effect",
      message: `no effect '${command.effectId}' belongs to ${command.aggregateType} '${command.aggregateId}'`
    }
  }
  if (command.attempt !== undefined && row.attempts !== command.attempt) {
    return {
      _tag: "Refused",
      reason: "attempt-moved",
      message: `effect '${row.effectId}' is at attempt ${row.attempts}, not ${command.attempt}`
    }
  }
  const base = { effectId: row.effectId, kind: row.kind, payload: row.payload, attempt: row.attempts, by: command.by }
  const reason = command.reason ?? `${action === "retry" ? "retried" : "cancelled"} by an operator`
  if (action === "cancel") {
    if (row.status !== "pending" && row.status !== "running") {
      return {
        _tag: "Refused",
        reason: "not-cancellable",
        message: `effect '${row.effectId}' is already ${row.status}`
      }
    }
    return {
      _tag: "Apply",
      change: {
        status: "cancelled",
        error: JSON.stringify({ message: reason, reason: "cancelled" }),
        keepLease: row.status === "running",
        operatorAction: true
      },
      outcome: { ...base, status: "cancelled", error: { message: reason, reason: "cancelled" } }
    }
  }
  if (row.status !== "failed" && row.status !== "cancelled") {
    return {
      _tag: "Refused",
      reason: "not-retryable",
      message: `effect '${row.effectId}' is ${row.status}; only failed or cancelled effects can be retried`
    }
  }
  const stored = Option.getOrUndefined(decodeStoredError(row.error))
  if (row.status === "failed" && stored?.reason === "process-lost") {
    return {
      _tag: "Refused",
      reason: "may-have-taken-effect",
      message:
        `effect '${row.effectId}' (${row.kind}) was cut off by the end of its process (${stored.code ?? stored.reason}) and may have taken effect; ` +
        "a process-bound effect is never performed twice"
    }
  }
  if (row.status === "failed" && stored?.code === performedNotRecorded) {
    return {
      _tag: "Refused",
      reason: "may-have-taken-effect",
      message:
        `effect '${row.effectId}' (${row.kind}) was performed, but its outcome could not be recorded (${stored.reason}); ` +
        "a process-bound effect is never performed twice"
    }
  }
  if (performanceMayBeRunning(row, now)) {
    const until =
      row.leaseExpiresAt === null ? "" : ` (its lease runs until ${new Date(row.leaseExpiresAt).toISOString()})`
    return {
      _tag: "Refused",
      reason: "performance-may-be-running",
      message: `attempt ${row.attempts} of effect '${row.effectId}' may still be running: its owner ${row.leaseOwner} has not stopped it yet${until}; retry once it has`
    }
  }
  return {
    _tag: "Apply",
    change: { status: "pending", availableAt: now, operatorAction: true },
    outcome: { ...base, status: "retrying", error: { message: reason, reason: "operator" } }
  }
}

/** Pure: does this settlement apply to the row as it is now, and what does it change? */
export const decideSettlement = (
  row: SettlementTarget | undefined,
  command: SettlementCommand,
  now: number
): SettlementDecision => {
  if (command.type === "effect.retry" || command.type === "effect.cancel")
    return decideOperatorAction(row, command, now)
  if (row === undefined) return { _tag: "Stale", message: `no effect '${command.effectId}' exists` }
  if (row.aggregateType !== command.aggregateType || row.aggregateId !== command.aggregateId) {
    return {
      _tag: "Stale",
      message: `effect '${command.effectId}' belongs to ${row.aggregateType} '${row.aggregateId}'`
    }
  }
  const base = { effectId: row.effectId, kind: row.kind, payload: row.payload, attempt: row.attempts, by: command.by }
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
        change: {
          status: "pending",
          availableAt: now,
          error: JSON.stringify({ message: command.reason, reason: "process-lost" })
        },
        outcome: { ...base, status: "requeued", error: { message: command.reason, reason: "process-lost" } }
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
/**
 * The default id of an operator's action: `operator:<action>:<effectId>#<attempts>.<operatorActions>`,
 * read from the row when the request arrives. Two requests that saw the row in the same state share
 * the id, so a repeated click is one action (the second is answered from the first one's receipt).
 * Every applied operator action counts on the row, so the next legitimate action (a retry after
 * the retried attempt failed again, a cancel after a retry) gets a new id and is never answered
 * with an old receipt; refusals are not stored, so they occupy no id. A client that must make a
 * repeat across a state change one action sends its own `commandId` instead.
 */
export const operatorId = (action: "retry" | "cancel", effectId: string, attempts: number, operatorActions: number) =>
  `${operatorIdPrefix(action, effectId)}${attempts}.${operatorActions}`

const operatorIdPrefix = (action: "retry" | "cancel", effectId: string) => `operator:${action}:${effectId}#`

/**
 * Pure: whether `id` is a default operator id of `action` on the row, of its state now or of one before
 * (fewer actions, or as many with no more attempts: both only grow). A client may send such an id to
 * repeat an earlier request; one of a state the row has not reached would be a later plain request's
 * id, answered then from that receipt and not applied.
 */
export const isOperatorIdSoFar = (
  id: string,
  action: "retry" | "cancel",
  row: Pick<OperatorTarget, "effectId" | "attempts" | "operatorActions">
): boolean => {
  const prefix = operatorIdPrefix(action, row.effectId)
  const state = /^(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})$/.exec(id.startsWith(prefix) ? id.slice(prefix.length) : "")
  if (state === null) return false
  const [attempts, actions] = [Number(state[1]), Number(state[2])]
  return actions < row.operatorActions || (actions === row.operatorActions && attempts <= row.attempts)
}

/** The row as the default operator id needs it. */
export interface OperatorTarget {
  readonly effectId: string
  readonly aggregateType: string
  readonly aggregateId: string
  readonly attempts: number
  readonly operatorActions: number
  readonly updatedAt: number
}

/** The id the last applied operator action of this kind had, if the row has had one at this attempt count. */
export const previousOperatorId = (action: "retry" | "cancel", row: OperatorTarget): string | undefined =>
  row.operatorActions > 0 ? operatorId(action, row.effectId, row.attempts, row.operatorActions - 1) : undefined

/**
 * Pure: the default id of an operator's request. A request that finds the row exactly as the same
 * action left it (that action's receipt was accepted at the row's last change) repeats it and gets
 * its id, so it is answered from its receipt; any other request gets the id of the row's state now.
 */
export const defaultOperatorId = (
  action: "retry" | "cancel",
  row: OperatorTarget,
  previous: { readonly status: "accepted" | "rejected"; readonly acceptedAt: number } | undefined
): string => {
  const repeated = previousOperatorId(action, row)
  return repeated !== undefined && previous?.status === "accepted" && previous.acceptedAt === row.updatedAt
    ? repeated
    : operatorId(action, row.effectId, row.attempts, row.operatorActions)
}

/** The command for an operator's action on a row: what the operator sent and which row, nothing of its state. */
export const operatorCommand = (
  action: "retry" | "cancel",
  row: {
    readonly effectId: string
    readonly aggregateType: string
    readonly aggregateId: string
    readonly attempts: number
    readonly operatorActions: number
  },
  commandId?: string
): OperatorCommand => ({
  type: action === "retry" ? "effect.retry" : "effect.cancel",
  commandId: commandId ?? operatorId(action, row.effectId, row.attempts, row.operatorActions),
  effectId: row.effectId,
  aggregateType: row.aggregateType,
  aggregateId: row.aggregateId,
  by: "operator"
})
