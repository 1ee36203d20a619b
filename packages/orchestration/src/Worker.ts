/**
 * Who holds a lease. Each worker process (or, in tests, each simulated process) has an owner id and
 * a heartbeat row; a lease is only reclaimed from an owner whose lease expired AND whose heartbeat
 * stopped, so a slow but live owner keeps its rows.
 *
 * A missing heartbeat means its owner is dead only if the owner could have written it. The store
 * refuses everyone's writes alike during an outage, so the judge must itself have seen the store
 * take its own heartbeats for the whole dead-after span before it calls anyone dead; right after
 * an outage (or its own start) it does not judge. A process never judges itself: its own rows are
 * never reclaimed by it (see Reactor's renewal rule).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Clock, Context, Duration, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import * as LoopRounds from "./LoopRounds.js"
import * as Owners from "./Owners.js"
import { StoreBackend } from "./storage/StoreBackend.js"
import { toStorageFailure } from "./storage/StorageErrors.js"

export interface WorkerShape {
  readonly ownerId: string
  readonly nodeId: string
  /** How often the heartbeat is written. */
  readonly heartbeatEvery: Duration.Duration
  /** An owner whose heartbeat is older than this is dead. */
  readonly deadAfter: Duration.Duration
  /**
   * The heartbeat time before which another owner counts as dead, as this process may judge it at
   * `now` (see `deadBefore`), or undefined while it may not judge at all.
   */
  readonly deadBefore: (now: number) => Effect.Effect<number | undefined>
}

/**
 * Pure: the heartbeat cutoff for judging owners dead at `now`, given since when this process has
 * seen the store take its own heartbeats without a refusal in between (undefined: its last beat
 * failed). Undefined when it has not watched a whole `deadAfterMs` span: a heartbeat missing from
 * a span in which the store may have refused it says nothing about its writer.
 */
export const deadBefore = (deadAfterMs: number, writableSince: number | undefined, now: number): number | undefined => {
  const cutoff = now - deadAfterMs
  return writableSince !== undefined && writableSince <= cutoff ? cutoff : undefined
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
 * the next beat: a missed beat can only make this owner look dead sooner, never lose work, and it
 * stops this process judging others until it has again watched a whole dead-after span.
 */
export const layer = (options: WorkerOptions = {}) =>
  Layer.scoped(
    Worker,
    Effect.gen(function* () {
      const sql = yield* SqlClient
      const nodeId = options.nodeId ?? "node"
      const deadAfter = Duration.decode(options.deadAfter ?? "10 seconds")
      /** Since when every heartbeat of this process landed; undefined after a refused one. */
      let writableSince: number | undefined
      const identity: WorkerShape = {
        nodeId,
        ownerId: options.ownerId ?? `${nodeId}:${randomUUID()}`,
        heartbeatEvery: Duration.decode(options.heartbeatEvery ?? "1 second"),
        deadAfter,
        deadBefore: (now) => Effect.sync(() => deadBefore(Duration.toMillis(deadAfter), writableSince, now))
      }
      const beat = Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        yield* Owners.heartbeat(identity.ownerId, nodeId, now).pipe(
          // A beat that failed or died did not land: until one does, this process judges nobody.
          Effect.tapErrorCause(() => Effect.sync(() => (writableSince = undefined))),
          Effect.tap(() => Effect.sync(() => (writableSince ??= now)))
        )
      }).pipe(Effect.mapError(toStorageFailure("heartbeat")), Effect.provideService(SqlClient, sql))
      yield* (yield* StoreBackend)
        .holdNodeId(nodeId)
        .pipe(Effect.catchTag("SqlError", (error) => Effect.fail(toStorageFailure("hold node id")(error))))
      yield* beat
      yield* Effect.forkScoped(
        Effect.forever(
          Effect.sleep(identity.heartbeatEvery).pipe(
            Effect.zipRight(beat),
            // swallow-ok: logged, and retried at the next beat (a missed beat only makes this owner look
            // dead sooner). A defect too: a heartbeat loop that died would leave this live process
            // looking dead to its peers, who would take its leases.
            LoopRounds.survive("heartbeat not recorded; retrying at the next beat")
          )
        )
      )
      yield* Effect.addFinalizer(() =>
        Clock.currentTimeMillis.pipe(
          Effect.flatMap((now) => Owners.markStopped(identity.ownerId, now)),
          Effect.catchAll((error) =>
            Effect.logWarning("could not mark the worker stopped; its heartbeat will expire instead", error)
          ),
          Effect.provideService(SqlClient, sql)
        )
      )
      return identity
    })
  )
