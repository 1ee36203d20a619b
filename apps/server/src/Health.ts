/**
 * The server's health: free space against the floor, whether the store is taking writes, each
 * reactor's lag, and outbox depth. `unavailable` (503) when new work would be refused: engine not
 * admitting, data volume below its floor, or the store refusing writes. `degraded` (200) when work
 * is waiting too long, space is getting close to the floor, or effects are quarantined (parked for
 * an operator because their aggregate cannot record their settlement), or a component of the domain
 * (an MCP server) is not up.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Engine, FreeSpace, Outbox, Owners, StorageErrors, StoreBackend, Worker } from "@orchestration/engine"
import { Clock, Duration, Effect, Option } from "effect"
import { DomainHealth } from "./DomainHealth.js"
import type { HealthReport } from "./http/Api.js"
import * as OutboxStats from "./OutboxStats.js"
import { ServerState } from "./ServerState.js"
import { StoreWritability } from "./StoreWritability.js"

/** A due row waiting longer than this makes the server `degraded`. */
export const stalledAfterMs = 60_000

/**
 * A writer of the store open longer than this makes the server `degraded` (PostgreSQL): it holds
 * the commit horizon back, so reactors and followers of the log stall behind it (nothing is skipped).
 */
export const writerOpenAfterMs = 30_000

/** Pure: the status from the facts. */
export const statusOf = (facts: {
  readonly active: boolean
  readonly belowFloor: boolean
  readonly writable: boolean
  readonly freeBytes: number
  readonly floorBytes: number
  readonly oldestPendingAgeMs: number
  readonly quarantined: number
  readonly componentsDegraded?: number
  readonly oldestWriterMs?: number
}): HealthReport["status"] => {
  if (!facts.active || facts.belowFloor || !facts.writable) return "unavailable"
  if (
    facts.oldestPendingAgeMs > stalledAfterMs ||
    facts.freeBytes < 2 * facts.floorBytes ||
    facts.quarantined > 0 ||
    (facts.oldestWriterMs ?? 0) > writerOpenAfterMs ||
    (facts.componentsDegraded ?? 0) > 0
  )
    return "degraded"
  return "ok"
}

/**
 * The store's own checks, independent of replication: it answers, how fast, whether it takes writes
 * (a PostgreSQL standby or read-only server does not), and which worker processes are live on it.
 */
const databaseReport = Effect.gen(function* () {
  const sql = yield* SqlClient
  const backend = yield* StoreBackend
  const worker = yield* Worker.Worker
  const started = yield* Clock.currentTimeMillis
  const probe =
    backend.dialect === "postgres"
      ? Effect.map(
          sql<{
            recovery: boolean
            read_only: string
          }>`SELECT pg_is_in_recovery() AS recovery, current_setting('transaction_read_only') AS read_only`,
          (rows) => rows[0]?.recovery === false && rows[0]?.read_only === "off"
        )
      : Effect.as(sql`SELECT 1`, true)
  // swallow-ok: a failed probe is the report (connected: false), logged; health must answer.
  const acceptsWrites = yield* probe.pipe(
    Effect.tapError((error) => Effect.logError("health: the database did not answer", error)),
    Effect.option
  )
  const now = yield* Clock.currentTimeMillis
  const latencyMs = now - started
  // swallow-ok: a read for the report; a store that cannot answer it is reported by the probe above.
  const oldestWriterMs =
    acceptsWrites._tag === "Some"
      ? yield* backend.oldestWriterMs.pipe(Effect.orElseSucceed(() => undefined))
      : undefined
  const liveOwners =
    acceptsWrites._tag === "Some"
      ? // swallow-ok: a read for the report; if it fails right after the probe answered, this process is the one live owner it knows.
        yield* Owners.liveOwners(now - Duration.toMillis(worker.deadAfter)).pipe(
          Effect.orElseSucceed(() => [worker.ownerId])
        )
      : []
  return {
    backend: backend.dialect,
    nodeId: worker.nodeId,
    connected: acceptsWrites._tag === "Some",
    latencyMs,
    acceptsWrites: acceptsWrites._tag === "Some" && acceptsWrites.value,
    liveOwners,
    oldestWriterMs: oldestWriterMs ?? 0
  }
})

export const report = Effect.gen(function* () {
  const engine = yield* Engine.Engine
  const state = yield* ServerState
  const writability = yield* StoreWritability
  const space = yield* (yield* FreeSpace.FreeSpace).check
  const now = yield* Clock.currentTimeMillis
  const active = yield* engine.isActive
  const stats = yield* engine.stats
  const reads = Effect.all({
    counts: Outbox.countsByStatus.pipe(Effect.mapError(StorageErrors.toStorageFailure("read outbox counts"))),
    reactors: Effect.forEach(state.reactors, (r) =>
      Effect.map(OutboxStats.reactorLag(r.kinds, now), (lag) => ({ name: r.name, ...lag }))
    )
  })
  // A store that cannot even answer these reads is not writable either; the report says so
  // instead of failing the health check itself. swallow-ok: a read, logged, and reported as
  // `writable: false` / unavailable.
  const read = yield* reads.pipe(
    Effect.tapError((failure) => Effect.logError("health: the store did not answer", failure)),
    Effect.option
  )
  const database = yield* databaseReport
  const domain = yield* Effect.serviceOption(DomainHealth)
  const components = Option.isSome(domain) ? yield* domain.value.components : []
  const writable = read._tag === "Some" && database.acceptsWrites && (yield* writability.writable)
  const reactors = read._tag === "Some" ? read.value.reactors : []
  const counts = read._tag === "Some" ? read.value.counts : {}
  const body: HealthReport = {
    status: statusOf({
      active,
      belowFloor: space.belowFloor,
      writable,
      freeBytes: space.freeBytes,
      floorBytes: space.floorBytes,
      oldestPendingAgeMs: Math.max(0, ...reactors.map((r) => r.oldestPendingAgeMs)),
      quarantined: counts.quarantined ?? 0,
      componentsDegraded: components.filter((c) => c.status !== "ok").length,
      oldestWriterMs: database.oldestWriterMs
    }),
    storage: { freeBytes: space.freeBytes, floorBytes: space.floorBytes, writable },
    engine: { active, head: stats.head, queueDepth: stats.queueDepth },
    reactors,
    outbox: {
      pending: counts.pending ?? 0,
      running: counts.running ?? 0,
      failed: counts.failed ?? 0,
      quarantined: counts.quarantined ?? 0
    },
    database,
    components
  }
  return body
})
