/**
 * Who holds a lease. Each worker process (or, in tests, each simulated process) has an owner id and
 * a heartbeat row; a lease is only reclaimed from an owner whose lease expired AND whose heartbeat
 * stopped, so a slow but live owner keeps its rows.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Clock, Context, Duration, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import * as Outbox from "./Outbox.js"
import { StoreBackend } from "./storage/StoreBackend.js"
import { toStorageFailure } from "./storage/StorageErrors.js"

export interface WorkerShape {
  readonly ownerId: string
  readonly nodeId: string
  /** How often the heartbeat is written. */
  readonly heartbeatEvery: Duration.Duration
  /** An owner whose heartbeat is older than this is dead. */
  readonly deadAfter: Duration.Duration
}

export class Worker extends Context.Tag("orchestration/Worker")<Worker, WorkerShape>() {}

export interface WorkerOptions {
  /** Stable per machine or deployment slot (config NODE_ID). Default "node". */
  readonly nodeId?: string
  /** Default: `<nodeId>:<random>`, new for every process incarnation. */
  readonly ownerId?: string
  readonly heartbeatEvery?: Duration.DurationInput
  readonly deadAfter?: Duration.DurationInput
}

/**
 * The worker identity with its heartbeat: written once before the layer is ready, then every
 * `heartbeatEvery`; marked stopped when the scope closes. A failed heartbeat is logged and retried at
 * the next beat: a missed beat can only make this owner look dead sooner, never lose work.
 */
export const layer = (options: WorkerOptions = {}) =>
  Layer.scoped(
    Worker,
    Effect.gen(function* () {
      const sql = yield* SqlClient
      const nodeId = options.nodeId ?? "node"
      const identity: WorkerShape = {
        nodeId,
        ownerId: options.ownerId ?? `${nodeId}:${randomUUID()}`,
        heartbeatEvery: Duration.decode(options.heartbeatEvery ?? "1 second"),
        deadAfter: Duration.decode(options.deadAfter ?? "10 seconds")
      }
      const beat = Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        yield* Outbox.heartbeat(identity.ownerId, nodeId, now)
      }).pipe(Effect.mapError(toStorageFailure("heartbeat")), Effect.provideService(SqlClient, sql))
      yield* (yield* StoreBackend).holdNodeId(nodeId).pipe(
        Effect.catchTag("SqlError", (error) => Effect.fail(toStorageFailure("hold node id")(error)))
      )
      yield* beat
      yield* Effect.forkScoped(
        Effect.forever(
          Effect.sleep(identity.heartbeatEvery).pipe(
            Effect.zipRight(beat),
            Effect.catchAll((failure) => Effect.logWarning("heartbeat not recorded; retrying at the next beat", failure))
          )
        )
      )
      yield* Effect.addFinalizer(() =>
        Clock.currentTimeMillis.pipe(
          Effect.flatMap((now) => Outbox.markStopped(identity.ownerId, now)),
          Effect.catchAll((error) => Effect.logWarning("could not mark the worker stopped; its heartbeat will expire instead", error)),
          Effect.provideService(SqlClient, sql)
        )
      )
      return identity
    })
  )
