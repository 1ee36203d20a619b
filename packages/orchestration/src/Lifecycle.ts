/**
 * The engine's lifecycle: migrate the store at boot, then four phases. `parked`: built, not yet
 * activated (boot reconciles meanwhile); `open`: admitting; `draining`: clients are refused while
 * queued work and settlements of running effects finish; `closed`: everything is refused. Nothing
 * is admitted from a client before activation (unless told to wait) or after the drain begins.
 */
import { Deferred, Effect } from "effect"
import type { Origin } from "./CommandId.js"
import type { CommandQueue } from "./CommandQueue.js"
import { EngineUnavailable, type StorageFailure } from "./Errors.js"
import type { Projection } from "./Projection.js"
import { migrate } from "./storage/Migrations.js"
import { toStorageFailure } from "./storage/StorageErrors.js"
import { StoreBackend } from "./storage/StoreBackend.js"
import type { SqlClient } from "@effect/sql/SqlClient"

export type Phase = "parked" | "open" | "draining" | "closed"

/** What a client's dispatch does before activation: `wait` (queued until then) or `fail`. */
export type BeforeActivation = "wait" | "fail"

/**
 * Whether a command from `origin` is admitted in `phase`: undefined, or the refusal. Clients wait (or
 * are refused) until activation and are refused once draining starts; the engine's own commands
 * (settlements of effects still running) are let through the drain so running work can finish.
 */
export const admission = (
  phase: Phase,
  origin: Origin,
  beforeActivation: BeforeActivation
): EngineUnavailable | undefined => {
  switch (phase) {
    case "open":
      return undefined
    case "parked":
      return origin === "client" && beforeActivation === "fail"
        ? new EngineUnavailable({ reason: "not-activated", message: "the engine is starting; retry shortly" })
        : undefined
    case "draining":
      return origin === "internal"
        ? undefined
        : new EngineUnavailable({ reason: "shutting-down", message: "the engine is shutting down" })
    case "closed":
      return new EngineUnavailable({ reason: "shutting-down", message: "the engine is shutting down" })
  }
}

/** Migrates the store and sets up the projections' tables; one booting process at a time. */
export const migrateStore = (projections: ReadonlyArray<Projection>): Effect.Effect<void, StorageFailure, SqlClient> =>
  Effect.flatMap(StoreBackend, (backend) =>
    // On a shared store several processes may boot at once; one migrates and sets up at a time.
    backend
      .exclusively(
        "migrate",
        Effect.gen(function* () {
          yield* migrate.pipe(Effect.mapError(toStorageFailure("migrate")))
          for (const projection of projections) {
            yield* projection.setup.pipe(Effect.mapError(toStorageFailure(`setup projection ${projection.name}`)))
          }
        })
      )
      .pipe(Effect.mapError(toStorageFailure("migrate")))
  )

export interface Lifecycle {
  readonly phase: () => Phase
  /** The admission decision for this origin now (see `admission`). */
  readonly admit: (origin: Origin) => EngineUnavailable | undefined
  /** Resolves when the engine is activated (the processor and reactors park on it). */
  readonly awaitActivation: Effect.Effect<void>
  readonly activate: Effect.Effect<void>
  readonly stopAdmitting: Effect.Effect<void>
  /**
   * Drains, then closes. Drained means no command queued or in a batch: internal commands (the
   * settlements of effects still running) are admitted and waited for until then. The check and
   * the close happen in one step, so nothing is admitted between them. An engine never activated
   * has no processor to wait for: it closes at once and refuses what was queued.
   */
  readonly shutdown: Effect.Effect<void>
}

/** The phases over a command queue, which is asked for the drain and told to refuse at close. */
export const make = (beforeActivation: BeforeActivation, queue: CommandQueue): Effect.Effect<Lifecycle> =>
  Effect.gen(function* () {
    const activated = yield* Deferred.make<void>()
    let phase: Phase = "parked"
    // Whether the processor was ever released: if not, queued commands can only be refused.
    let started = false

    const shutdown = Effect.gen(function* () {
      if (phase === "closed") return
      phase = "draining"
      while (started && queue.unanswered() > 0) yield* queue.idle()
      phase = "closed"
      // Anything still queued (only possible if never activated) is told, never left waiting.
      yield* queue.refuseQueued(
        new EngineUnavailable({ reason: "shutting-down", message: "the engine shut down before this command ran" })
      )
    })

    return {
      phase: () => phase,
      admit: (origin) => admission(phase, origin, beforeActivation),
      awaitActivation: Deferred.await(activated),
      activate: Effect.suspend(() => {
        if (phase !== "parked") return Effect.void
        phase = "open"
        started = true
        return Deferred.succeed(activated, undefined)
      }),
      stopAdmitting: Effect.sync(() => {
        if (phase === "open" || phase === "parked") phase = "draining"
      }),
      shutdown
    }
  })
