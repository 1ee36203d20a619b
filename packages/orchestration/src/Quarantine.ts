/**
 * Quarantine: when the aggregate that owns an effect cannot record the effect's settlement (its log
 * cannot be replayed, its type is no longer registered, or its domain code throws), the row is
 * parked with status `quarantined` and a stored record, instead of stopping boot or being retried in
 * silence. It is the outbox side of AggregateStates' quarantine of an aggregate. Every other
 * aggregate is served; an operator releases the row (its parked settlement is dispatched again,
 * once the cause is fixed) or fails it (with their reason, without telling the aggregate that
 * cannot hear it). Which dispatch failures are a per-aggregate problem is decided here, once, over
 * the closed DispatchError union: a failure of the store or of the engine is never quarantined here
 * (the reactor parks a row only when the engine cannot take even the failure recorded in place of
 * its outcome: `settlement-defect`, ReactorSettlement.ts).
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import { Cause, Clock, Effect, Exit, Option, Schema } from "effect"
import type { EffectError, SettledBy } from "./EffectOutcomes.js"
import { Engine } from "./Engine.js"
import { type DispatchError, QUARANTINE_UNREADABLE, StorageFailure } from "./Errors.js"
import * as Outbox from "./Outbox.js"
import type { DispatchAnswer } from "./Processor.js"
import { QuarantineReason } from "./QuarantineRecord.js"
import { toStorageFailure } from "./storage/StorageErrors.js"
import { notifyOthersOfRowWrite, StoreBackend } from "./storage/StoreBackend.js"

// The stored record's schema has its own module (QuarantineRecord.ts): Outbox reads it, and imports nothing of this one.
export { QuarantineReason, QuarantineRecord } from "./QuarantineRecord.js"

/** What a failed settlement means for its row. */
export type SettleFailure =
  /** The row moved on (settled by an earlier run, or at another attempt): nothing to do. */
  | { readonly _tag: "Stale"; readonly message: string }
  /** The owning aggregate cannot record it: park the row. */
  | { readonly _tag: "Quarantine"; readonly reason: QuarantineReason; readonly message: string }
  /** The store or the engine failed (or a bug of ours): not the row's problem; never parked. */
  | { readonly _tag: "Fatal" }

/**
 * Pure and closed: the switch names every DispatchError tag, so a new failure must be placed here.
 * `registered`: whether the row's aggregate type is registered with this engine (a settlement of an
 * unregistered type is refused as InvalidCommand before anything runs).
 */
export const classify = (
  registered: boolean,
  aggregateType: string,
  cause: Cause.Cause<DispatchError>
): SettleFailure => {
  const failure = Cause.failureOption(cause)
  // A defect is the engine's own bug (the processor turns its defects into StorageFailure already).
  if (Option.isNone(failure)) return { _tag: "Fatal" }
  const error = failure.value
  switch (error._tag) {
    case "CommandRejected":
    // An operator's retry or cancel the row's state refuses: it names no settlement of this row.
    case "EffectActionRefused":
      return { _tag: "Stale", message: error.message }
    case "AggregateUnavailable":
      return { _tag: "Quarantine", reason: "aggregate-unavailable", message: error.message }
    case "CommandDefect":
      return { _tag: "Quarantine", reason: "command-defect", message: error.message }
    case "InvalidCommand":
      return registered
        ? { _tag: "Fatal" }
        : {
            _tag: "Quarantine",
            reason: "aggregate-unregistered",
            message: `no aggregate named '${aggregateType}' is registered`
          }
    case "StorageFailure":
    case "EngineUnavailable":
    case "CommandIdConflict":
      return { _tag: "Fatal" }
  }
}

/** Parks a running row with the settlement it could not record and says so once, in the log. */
export const park = (
  row: Outbox.OutboxRow,
  settlement: Record<string, unknown>,
  failure: { readonly reason: QuarantineReason; readonly message: string },
  by: SettledBy
) =>
  Effect.gen(function* () {
    const at = yield* Clock.currentTimeMillis
    const parked = yield* Outbox.park(row.effectId, row.attempts, {
      reason: failure.reason,
      message: failure.message,
      by,
      at,
      settlement
    })
    if (parked) {
      yield* Effect.logError(
        "effect quarantined: its aggregate cannot record its settlement; an operator releases or fails it",
        {
          effectId: row.effectId,
          kind: row.kind,
          aggregate: `${row.aggregateType}/${row.aggregateId}`,
          attempt: row.attempts,
          reason: failure.reason,
          message: failure.message
        }
      )
    }
    return parked
  }).pipe(Effect.mapError(toStorageFailure("quarantine an effect")))

/**
 * After a settlement of `row` failed: classifies the failure and parks the row when it is a
 * per-aggregate problem. The caller decides what Stale and Fatal mean where it runs.
 */
export const afterFailedSettle = (
  row: Outbox.OutboxRow,
  settlement: Record<string, unknown>,
  cause: Cause.Cause<DispatchError>,
  by: SettledBy
) =>
  Effect.gen(function* () {
    const engine = yield* Engine
    const failure = classify(engine.aggregate(row.aggregateType) !== undefined, row.aggregateType, cause)
    if (failure._tag === "Quarantine") yield* park(row, settlement, failure, by)
    return failure
  })

/** The effect is not (or no longer) quarantined at the attempt the operator saw. */
export class EffectNotQuarantined extends Schema.TaggedError<EffectNotQuarantined>()("EffectNotQuarantined", {
  effectId: Schema.String,
  status: Schema.String,
  message: Schema.String
}) {}

/** A release found the cause still there: the row stays parked, with the newer reason stored. */
export class EffectStillQuarantined extends Schema.TaggedError<EffectStillQuarantined>()("EffectStillQuarantined", {
  effectId: Schema.String,
  reason: QuarantineReason,
  message: Schema.String
}) {}

const parkedRow = (effectId: string) =>
  Effect.gen(function* () {
    const row = yield* Outbox.find(effectId).pipe(Effect.mapError(toStorageFailure("read effect")))
    if (row === undefined || row.status !== "quarantined") {
      return yield* new EffectNotQuarantined({
        effectId,
        status: row?.status ?? "missing",
        message:
          row === undefined
            ? `no effect '${effectId}' exists`
            : `effect '${effectId}' is ${row.status}, not quarantined`
      })
    }
    return row
  })

/**
 * The settlement a parked row keeps. A record that cannot be read is the store's damage, not the
 * aggregate's: the row stays parked (an operator can still fail it), and nothing is dispatched on a guess.
 */
const parkedRecord = (row: Outbox.OutboxRow) =>
  row.quarantine !== null
    ? Effect.succeed(row.quarantine)
    : Effect.fail(
        new StorageFailure({
          reason: "corrupt",
          code: QUARANTINE_UNREADABLE,
          operation: "release a quarantined effect",
          message: `the quarantine record of effect '${row.effectId}' cannot be read (${
            row.quarantineUnreadable ?? "none is stored"
          }); fail it with a reason instead`
        })
      )

/**
 * Releases a parked row once its cause is fixed: the aggregate is replayed afresh and the parked
 * settlement is dispatched again (same id, same payload, so a repeated release is answered from its
 * receipt). When the cause is still there the row stays parked and the newer reason is stored.
 */
export const release = (
  effectId: string
): Effect.Effect<
  DispatchAnswer,
  EffectNotQuarantined | EffectStillQuarantined | StorageFailure | DispatchError,
  Engine | SqlClient
> =>
  Effect.gen(function* () {
    const engine = yield* Engine
    const row = yield* parkedRow(effectId)
    const record = yield* parkedRecord(row)
    yield* engine.releaseAggregate(row.aggregateType, row.aggregateId)
    const exit = yield* Effect.exit(engine.dispatchWithReceipt(record.settlement, { origin: "internal" }))
    if (Exit.isSuccess(exit)) {
      yield* Effect.logWarning("quarantined effect released: its settlement is recorded", {
        effectId,
        commandId: exit.value.commandId
      })
      return exit.value
    }
    const failure = classify(engine.aggregate(row.aggregateType) !== undefined, row.aggregateType, exit.cause)
    if (failure._tag !== "Quarantine") return yield* Effect.failCause(exit.cause)
    const at = yield* Clock.currentTimeMillis
    yield* Outbox.reparked(effectId, row.attempts, {
      ...record,
      reason: failure.reason,
      message: failure.message,
      at
    }).pipe(Effect.mapError(toStorageFailure("quarantine an effect")))
    return yield* new EffectStillQuarantined({ effectId, reason: failure.reason, message: failure.message })
  }).pipe(Effect.withSpan("Quarantine.release"))

/** The error stored on a row an operator failed out of quarantine. */
export const failedByOperator = (reason: string): EffectError => ({
  message: reason,
  code: "failed-by-operator",
  reason: "operator"
})

/**
 * Ends a parked row as failed with the operator's reason. The owning aggregate is not told (it
 * cannot record anything; that is why the row was parked): the row, its record and the reason stay.
 */
export const fail = (
  effectId: string,
  reason: string
): Effect.Effect<Outbox.OutboxRow, EffectNotQuarantined | StorageFailure, SqlClient> =>
  Effect.gen(function* () {
    const row = yield* parkedRow(effectId)
    const now = yield* Clock.currentTimeMillis
    const failed = yield* Outbox.failParked(effectId, row.attempts, JSON.stringify(failedByOperator(reason)), now).pipe(
      Effect.mapError(toStorageFailure("fail a quarantined effect"))
    )
    const after = yield* Outbox.find(effectId).pipe(Effect.mapError(toStorageFailure("read effect")))
    if (!failed || after === undefined) {
      // Released or failed by someone else between the read and the write: the operator is told.
      const status = after?.status ?? "missing"
      return yield* new EffectNotQuarantined({
        effectId,
        status,
        message: `effect '${effectId}' changed meanwhile; it is ${status}`
      })
    }
    // The row no longer holds its lane: reactors look again now, not at their poll. Through this process's
    // engine (its reactors, and the others on a shared store), or, with the store alone (the CLI's direct
    // mode), by notifying the processes that share it.
    const engine = yield* Effect.serviceOption(Engine)
    if (Option.isSome(engine)) yield* engine.value.outboxWritten([effectId])
    else {
      const backend = yield* Effect.serviceOption(StoreBackend)
      if (Option.isSome(backend)) yield* notifyOthersOfRowWrite(backend.value)
    }
    yield* Effect.logWarning("quarantined effect failed by an operator", { effectId, attempt: row.attempts })
    return after
  }).pipe(Effect.withSpan("Quarantine.fail"))

/** How many rows are parked now (for /health). */
export const count = Outbox.countsByStatus.pipe(
  Effect.map((counts) => counts.quarantined ?? 0),
  Effect.mapError(toStorageFailure("count quarantined effects"))
)
