/** GET /health and GET /metrics: outside /v1 and without the token, for probes and scrapers. */
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import type { SqlClient } from "@effect/sql/SqlClient"
import { Engine, type Worker } from "@orchestration/engine"
import * as Health from "../Health.js"
import { render, ServerMetrics } from "../Metrics.js"
import * as OutboxStats from "../OutboxStats.js"
import { ServerState } from "../ServerState.js"
import type { StoreWritability } from "../StoreWritability.js"
import { HealthReport, ServerApi } from "./Api.js"
import { Clock, Effect, Schema } from "effect"

export const OpsLive = HttpApiBuilder.group(ServerApi, "ops", (handlers) =>
  Effect.gen(function* () {
    const context = yield* Effect.context<
      Engine.Engine | ServerState | ServerMetrics | StoreWritability | SqlClient | Worker.Worker
    >()
    const encodeHealth = Schema.encode(HealthReport)
    return handlers
      .handleRaw("health", () =>
        Health.report.pipe(
          Effect.flatMap(encodeHealth),
          Effect.map((body) =>
            HttpServerResponse.unsafeJson(body, { status: body.status === "unavailable" ? 503 : 200 })
          ),
          Effect.orDie,
          Effect.provide(context)
        )
      )
      .handleRaw("metrics", () =>
        Effect.gen(function* () {
          const engine = yield* Engine.Engine
          const state = yield* ServerState
          const metrics = yield* ServerMetrics
          const now = yield* Clock.currentTimeMillis
          const stats = yield* engine.stats
          const gauges = yield* Effect.all({
            outboxRows: OutboxStats.rowsByStatusAndKind,
            reactors: Effect.forEach(state.reactors, (r) =>
              Effect.map(OutboxStats.reactorLag(r.kinds, now), (lag) => ({ name: r.name, ...lag }))
            ),
            leaseReclaims: OutboxStats.leaseReclaimsSince(state.bootedAt)
          })
          const text = render(yield* metrics.snapshot, {
            ...gauges,
            reconciledAtBoot: state.reconciled,
            head: stats.head,
            queueDepth: stats.queueDepth
          })
          return HttpServerResponse.text(text, { contentType: "text/plain; version=0.0.4; charset=utf-8" })
        }).pipe(
          // A scrape the store cannot answer is a 500 for the scraper, logged here.
          Effect.tapError((failure) => Effect.logError("metrics: the store did not answer", failure)),
          Effect.orDie,
          Effect.provide(context)
        )
      )
  })
)
