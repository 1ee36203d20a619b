/**
 * Pruning: settled outbox rows and old receipts are deleted after configurable periods, in small
 * batches in the background. Unsettled rows are never touched. A retry whose receipt was pruned is
 * treated as a new command: clients must not retry a command id older than the receipt period.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Clock, Duration, Effect, Layer } from "effect"
import { toStorageFailure } from "./storage/StorageErrors.js"

export interface RetentionOptions {
  /** Default 7 days. */
  readonly settledEffects?: Duration.DurationInput
  /** Default 30 days. */
  readonly receipts?: Duration.DurationInput
  /** Rows per delete. Default 500. */
  readonly batchSize?: number
  /** Default every minute. */
  readonly every?: Duration.DurationInput
}

/** Deletes one batch of each; returns how many rows went. */
export const pruneOnce = (options: RetentionOptions = {}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const now = yield* Clock.currentTimeMillis
    const batch = options.batchSize ?? 500
    const effectsBefore = now - Duration.toMillis(options.settledEffects ?? "7 days")
    const receiptsBefore = now - Duration.toMillis(options.receipts ?? "30 days")
    const effects = yield* sql<{ sequence: number }>`DELETE FROM outbox WHERE sequence IN (
        SELECT sequence FROM outbox WHERE status IN ('succeeded', 'failed', 'cancelled') AND updated_at < ${effectsBefore}
        ORDER BY sequence LIMIT ${batch}
      ) RETURNING sequence`
    const receipts = yield* sql<{ command_id: string }>`DELETE FROM receipts WHERE command_id IN (
        SELECT command_id FROM receipts WHERE accepted_at < ${receiptsBefore} LIMIT ${batch}
      ) RETURNING command_id`
    return { effects: effects.length, receipts: receipts.length }
  }).pipe(Effect.mapError(toStorageFailure("retention")))

/** The background pruner: failures are logged and retried at the next round (nothing is lost by waiting). */
export const layer = (options: RetentionOptions = {}) =>
  Layer.scopedDiscard(
    Effect.forkScoped(
      Effect.forever(
        Effect.sleep(options.every ?? "1 minute").pipe(
          Effect.zipRight(pruneOnce(options)),
          Effect.tap((pruned) =>
            pruned.effects + pruned.receipts > 0 ? Effect.logDebug("retention pruned", pruned) : Effect.void
          ),
          Effect.catchAll((failure) => Effect.logWarning("retention round failed; trying again next round", failure))
        )
      )
    )
  )
