/**
 * GET /v1/outbox/summary: the outbox at a glance for the dashboard, which samples it every few
 * seconds and charts lag and throughput from successive readings (`head`, `settled`).
 */
import { HttpApiBuilder } from "@effect/platform"
import type { SqlClient } from "@effect/sql/SqlClient"
import { Engine, Outbox, StorageErrors } from "@orchestration/engine"
import { Clock, Effect } from "effect"
import { fromStorageFailure } from "../ApiErrors.js"
import * as OutboxStats from "../OutboxStats.js"
import { ServerState } from "../ServerState.js"
import { ServerApi } from "./Api.js"

/** How many of the newest failed rows the summary carries. */
export const recentFailureCount = 20

const settledStatuses = new Set(["succeeded", "failed", "cancelled"])

export const OutboxLive = HttpApiBuilder.group(ServerApi, "outbox", (handlers) =>
  Effect.gen(function* () {
    const context = yield* Effect.context<Engine.Engine | ServerState | SqlClient>()
    return handlers.handle("summary", () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const state = yield* ServerState
        const now = yield* Clock.currentTimeMillis
        const stats = yield* engine.stats
        const { failedIds, oldest, quarantined, reactors, rows } = yield* Effect.all({
          rows: OutboxStats.rowsByStatusAndKind,
          oldest: OutboxStats.oldestDuePendingAt(now),
          reactors: Effect.forEach(state.reactors, (r) =>
            Effect.map(OutboxStats.reactorLag(r.kinds, now), (lag) => ({ name: r.name, ...lag }))
          ),
          failedIds: OutboxStats.newestFailedIds(recentFailureCount),
          quarantined: Outbox.list({ status: "quarantined", limit: recentFailureCount }).pipe(
            Effect.mapError(StorageErrors.toStorageFailure("read quarantined effects"))
          )
        })
        const failures = yield* Effect.forEach(failedIds, (id) =>
          Outbox.find(id).pipe(Effect.mapError(StorageErrors.toStorageFailure("read failed effect")))
        )
        return {
          at: now,
          head: stats.head,
          rows,
          settled: rows.filter((r) => settledStatuses.has(r.status)).reduce((sum, r) => sum + r.count, 0),
          oldestPendingAgeMs: oldest === null ? 0 : Math.max(0, now - oldest),
          reactors,
          // A row retried between the two reads is no longer failed: it is left out.
          recentFailures: failures.filter((row) => row !== undefined && row.status === "failed").map((row) => row!),
          quarantined
        }
      }).pipe(Effect.mapError(fromStorageFailure), Effect.provide(context))
    )
  })
)
