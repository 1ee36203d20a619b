/**
 * Pruning: settled outbox rows, the stream chunks of settled effects and old receipts are deleted after
 * configurable periods, in small batches in the background. Unsettled rows are never touched. A retry whose receipt was pruned is
 * treated as a new command: clients must not retry a command id older than the receipt period.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Clock, Duration, Effect, Layer, Option } from "effect"
import * as LoopRounds from "./LoopRounds.js"
import { toStorageFailure } from "./storage/StorageErrors.js"
import * as StreamChunks from "./StreamChunks.js"
import { StreamTails } from "./StreamTails.js"

export interface RetentionOptions {
  /** How long a settled outbox row is kept after its last update. Default 7 days. */
  readonly settledEffects?: Duration.DurationInput
  /**
   * How long the stream chunks of a settled effect (a model step's deltas) are kept after it settled.
   * Default 10 minutes: a reader that reconnects soon still finds them; the final text stays in the
   * effect's outcome (and the transcript). Never longer than `settledEffects`.
   */
  readonly settledStreams?: Duration.DurationInput
  /** How long a receipt is kept after it was accepted. Default 30 days. */
  readonly receipts?: Duration.DurationInput
  /** Rows per delete. Default 500. */
  readonly batchSize?: number
  /** Default every minute. */
  readonly every?: Duration.DurationInput
}

/** The periods the engine prunes by when given none (the audit uses them to tell pruned from missing). */
export const defaults = {
  settledEffects: Duration.days(7),
  settledStreams: Duration.minutes(10),
  receipts: Duration.days(30),
  batchSize: 500,
  every: Duration.minutes(1)
} as const

/**
 * The oldest moments at `now` whose rows are surely kept: a receipt accepted, or a settled row last
 * updated, before its horizon may have been pruned.
 */
export const horizonsAt = (now: number, options: RetentionOptions = {}) => ({
  receiptsBefore: now - Duration.toMillis(options.receipts ?? defaults.receipts),
  settledEffectsBefore: now - Duration.toMillis(options.settledEffects ?? defaults.settledEffects)
})

/** A settled row old enough to go: not one whose cancelled performance is still stopping under its lease. */
const prunable = (sql: SqlClient, before: number, now: number) =>
  sql`status IN ('succeeded', 'failed', 'cancelled') AND updated_at < ${before}
    AND NOT (status = 'cancelled' AND lease_owner IS NOT NULL AND lease_expires_at > ${now})`

/** Deletes one batch of each; returns how many rows went. */
export const pruneOnce = (options: RetentionOptions = {}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const now = yield* Clock.currentTimeMillis
    const batch = options.batchSize ?? defaults.batchSize
    const { receiptsBefore, settledEffectsBefore: effectsBefore } = horizonsAt(now, options)
    // Through outbox_settled_by_time (its WHERE is this one's status list), unordered: ordering by
    // sequence made SQLite sort every old row each round to keep 500. The outer WHERE says it again:
    // on PostgreSQL a DELETE that waited for a row's lock re-checks only its own WHERE on the row as
    // committed, and an operator's retry had made the row pending meanwhile (it was deleted, pending).
    // A cancelled row whose performer still holds a live lease is still stopping: it is kept.
    const effects = yield* sql<{ sequence: number }>`DELETE FROM outbox WHERE sequence IN (
        SELECT sequence FROM outbox WHERE ${prunable(sql, effectsBefore, now)} LIMIT ${batch}
      ) AND ${prunable(sql, effectsBefore, now)} RETURNING sequence`
    const receipts = yield* sql<{ command_id: string }>`DELETE FROM receipts WHERE command_id IN (
        SELECT command_id FROM receipts WHERE accepted_at < ${receiptsBefore} LIMIT ${batch}
      ) RETURNING command_id`
    // Chunks of an effect settled past the streams horizon go, and with its pruned row at the latest.
    const streamsPeriod = Math.min(
      Duration.toMillis(options.settledStreams ?? defaults.settledStreams),
      Duration.toMillis(options.settledEffects ?? defaults.settledEffects)
    )
    const compacted = yield* StreamChunks.compactSettled(batch, now - streamsPeriod, now)
    // Their tails go with them, so no reader is answered with text the table no longer holds.
    const tails = yield* Effect.serviceOption(StreamTails)
    if (Option.isSome(tails)) tails.value.forget(new Set(compacted))
    return { effects: effects.length, receipts: receipts.length, streamChunks: compacted.length }
  }).pipe(Effect.mapError(toStorageFailure("retention")))

/** The background pruner: failures are logged and retried at the next round (nothing is lost by waiting). */
export const layer = (options: RetentionOptions = {}) =>
  Layer.scopedDiscard(
    Effect.forkScoped(
      Effect.forever(
        Effect.sleep(options.every ?? defaults.every).pipe(
          Effect.zipRight(pruneOnce(options)),
          Effect.tap((pruned) =>
            pruned.effects + pruned.receipts + pruned.streamChunks > 0
              ? Effect.logDebug("retention pruned", pruned)
              : Effect.void
          ),
          // swallow-ok: logged; nothing is lost by pruning at the next round instead
          LoopRounds.survive("retention round failed; trying again next round")
        )
      )
    )
  )
