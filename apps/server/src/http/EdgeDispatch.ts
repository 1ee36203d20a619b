/**
 * Dispatch as the HTTP edge does it, for client commands and operator actions alike: the engine's
 * failures mapped once (ApiErrors.fromDispatchError), latency and outcome counted, and a log line
 * carrying the command id (clipped: the id is the client's).
 */
import { Engine } from "@orchestration/engine"
import { Clock, Effect } from "effect"
import { fromDispatchError } from "../ApiErrors.js"
import { clip } from "../ClientValue.js"
import { ServerMetrics } from "../Metrics.js"
import { StoreWritability } from "../StoreWritability.js"

export const make = Effect.gen(function* () {
  const engine = yield* Engine.Engine
  const metrics = yield* ServerMetrics
  const writability = yield* StoreWritability
  return Effect.fn("EdgeDispatch.dispatch")(function* (command: unknown, origin: "client" | "internal") {
    const started = yield* Clock.currentTimeMillis
    const elapsed = Effect.map(Clock.currentTimeMillis, (now) => (now - started) / 1000)
    const commandId =
      typeof (command as { commandId?: unknown })?.commandId === "string"
        ? (command as { commandId: string }).commandId
        : undefined
    return yield* engine.dispatchWithReceipt(command, { origin }).pipe(
      Effect.mapError(fromDispatchError),
      Effect.tap((answer) =>
        Effect.zipRight(
          Effect.flatMap(elapsed, (s) => metrics.observeDispatch(answer.duplicate ? "duplicate" : "accepted", s)).pipe(
            Effect.zipRight(answer.duplicate ? Effect.void : writability.landed)
          ),
          Effect.logDebug("command accepted").pipe(
            Effect.annotateLogs({ sequence: answer.sequence, duplicate: answer.duplicate, effectIds: answer.effectIds })
          )
        )
      ),
      Effect.tapError((error) => {
        // The store itself refused the write (not the floor, which is a policy).
        // A store reporting its file damaged is as unwritable as a full one; one unreadable row is not.
        const storeRefused =
          (error._tag === "StorageUnavailable" && error.reason !== "below-floor") ||
          (error._tag === "StorageCorrupt" && error.scope === "store")
        return Effect.zipRight(
          Effect.flatMap(elapsed, (s) => metrics.observeDispatch(error._tag, s)).pipe(
            Effect.zipRight(storeRefused ? writability.refused : Effect.void)
          ),
          // Damaged stored data is no client's mistake: an operator must see it (it is no refused write).
          (error._tag === "CommandDefect" || error._tag === "StorageCorrupt" || storeRefused
            ? Effect.logError("command failed")
            : Effect.logInfo("command refused")
          ).pipe(Effect.annotateLogs({ error: error._tag, reason: clip(error.message) }))
        )
      }),
      Effect.annotateLogs({ commandId: commandId === undefined ? "(none)" : clip(commandId), origin })
    )
  })
})
