/**
 * The closed set of failures a dispatch can end with. Each is a value with structured fields;
 * the HTTP edge maps tags to status codes once, the engine never does.
 */
import { Schema } from "effect"

/** The command is malformed: bad id, unknown or reserved type, schema failure. Nothing was stored. */
export class InvalidCommand extends Schema.TaggedError<InvalidCommand>()("InvalidCommand", {
  message: Schema.String,
  commandId: Schema.optional(Schema.String),
  issues: Schema.Array(Schema.Struct({ path: Schema.Array(Schema.String), message: Schema.String }))
}) {}

/** The command id was already used by a command with another payload, type or aggregate. */
export class CommandIdConflict extends Schema.TaggedError<CommandIdConflict>()("CommandIdConflict", {
  commandId: Schema.String,
  message: Schema.String
}) {}

/**
 * The decider refused the command. The rejection is stored under the command id and replayed,
 * except for an engine-internal command refused for now (a stream chunk that came before the one it
 * follows, reason `stream-out-of-order`): nothing is stored, and the same command sent later is decided again.
 */
export class CommandRejected extends Schema.TaggedError<CommandRejected>()("CommandRejected", {
  commandId: Schema.String,
  aggregateType: Schema.String,
  aggregateId: Schema.String,
  reason: Schema.String,
  message: Schema.String,
  duplicate: Schema.Boolean
}) {}

/** Why a write was refused, classified from the driver's code. */
export const StorageFailureReason = Schema.Literal(
  "disk-full",
  "io-error",
  "busy",
  "constraint",
  "corrupt",
  "read-only",
  "connection",
  "serialization",
  "unknown"
)
export type StorageFailureReason = typeof StorageFailureReason.Type

/**
 * The codes of a `corrupt` StorageFailure that concern one stored row the engine cannot read (its
 * receipt, its quarantine record), written by the engine itself. Any other `corrupt` code is the
 * driver's: the store's file or pages are damaged, and no write can be trusted to land.
 */
export const RECEIPT_UNREADABLE = "RECEIPT_UNREADABLE"
export const QUARANTINE_UNREADABLE = "QUARANTINE_UNREADABLE"
export const ROW_DAMAGE_CODES: ReadonlySet<string> = new Set([RECEIPT_UNREADABLE, QUARANTINE_UNREADABLE])

/**
 * Why an operator's retry or cancel was refused. A refusal is about the effect's state at that
 * moment, not about the command, so it is not stored under the command id: the same request sent
 * once the state allows it is performed.
 * - `no-such-effect`: no row with this id belongs to that aggregate.
 * - `attempt-moved`: the command named an attempt the row has moved past.
 * - `not-retryable`: only a failed or cancelled effect can be retried.
 * - `not-cancellable`: only a pending or running effect can be cancelled.
 * - `performance-may-be-running`: the cancelled attempt's owner has not yet stopped its handler.
 * - `may-have-taken-effect`: the process performing it ended mid-performance (a process-bound
 *   effect failed by boot reconcile or dead-owner reclaim); running it again could do it twice.
 * - `refused-by-owner`: the owning aggregate refused (e.g. the turn that asked for it has closed).
 */
export const EffectActionRefusal = Schema.Literal(
  "no-such-effect",
  "attempt-moved",
  "not-retryable",
  "not-cancellable",
  "performance-may-be-running",
  "may-have-taken-effect",
  "refused-by-owner"
)
export type EffectActionRefusal = typeof EffectActionRefusal.Type

/** An operator's retry or cancel that the effect's current state does not allow. Nothing was stored. */
export class EffectActionRefused extends Schema.TaggedError<EffectActionRefused>()("EffectActionRefused", {
  commandId: Schema.String,
  effectId: Schema.String,
  action: Schema.Literal("retry", "cancel"),
  reason: EffectActionRefusal,
  message: Schema.String
}) {}

/** The store refused a write (or a read the command needed). Nothing of the command committed. */
export class StorageFailure extends Schema.TaggedError<StorageFailure>()("StorageFailure", {
  reason: StorageFailureReason,
  code: Schema.String,
  message: Schema.String,
  operation: Schema.String
}) {}

/** The engine is not taking commands: not activated yet, shutting down, or its queue is full. */
export class EngineUnavailable extends Schema.TaggedError<EngineUnavailable>()("EngineUnavailable", {
  reason: Schema.Literal("not-activated", "shutting-down", "overloaded", "storage-below-floor"),
  message: Schema.String
}) {}

/** The aggregate's stored events cannot be replayed; its commands are refused, others are served. */
export class AggregateUnavailable extends Schema.TaggedError<AggregateUnavailable>()("AggregateUnavailable", {
  aggregateType: Schema.String,
  aggregateId: Schema.String,
  message: Schema.String
}) {}

/**
 * A decider, evolve or projection threw, or a projection wrote a row its table refuses (a unique,
 * primary-key or check constraint: `constraint` names it). The command failed; nothing of it committed.
 */
export class CommandDefect extends Schema.TaggedError<CommandDefect>()("CommandDefect", {
  commandId: Schema.String,
  aggregateType: Schema.String,
  aggregateId: Schema.String,
  stage: Schema.Literal("decide", "evolve", "projection"),
  constraint: Schema.optional(Schema.String),
  message: Schema.String
}) {}

/** A stored event could not be decoded. Reading the log stops loudly instead of skipping it. */
export class UndecodableEvent extends Schema.TaggedError<UndecodableEvent>()("UndecodableEvent", {
  sequence: Schema.Number,
  aggregateType: Schema.String,
  eventType: Schema.String,
  message: Schema.String
}) {}

/** Another process already holds the store for writing. */
export class StoreLocked extends Schema.TaggedError<StoreLocked>()("StoreLocked", {
  filename: Schema.String,
  message: Schema.String
}) {}

export type DispatchError =
  | InvalidCommand
  | CommandIdConflict
  | CommandRejected
  | EffectActionRefused
  | StorageFailure
  | EngineUnavailable
  | AggregateUnavailable
  | CommandDefect

/** Another live process on the shared store already runs with this node id (NODE_ID). */
export class NodeIdInUse extends Schema.TaggedError<NodeIdInUse>()("NodeIdInUse", {
  nodeId: Schema.String,
  message: Schema.String
}) {}
