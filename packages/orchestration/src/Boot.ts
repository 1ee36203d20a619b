/**
 * The boot sequence as one layer: over a parked engine, start the worker identity, reconcile what a
 * dead owner left running, fork the reactors parked, then activate (or leave activation to the
 * caller, e.g. the server once it listens). Nothing claims or is admitted before reconcile ends.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import { Context, Effect, Layer } from "effect"
import { Engine } from "./Engine.js"
import type { DispatchError, NodeIdInUse, StorageFailure } from "./Errors.js"
import * as Reactor from "./Reactor.js"
import { reconcileAfterProcessLoss, type ReconcileReport } from "./Reconcile.js"
import * as Retention from "./Retention.js"
import * as TimerLoop from "./TimerLoop.js"
import { StoreBackend } from "./storage/StoreBackend.js"
import * as Worker from "./Worker.js"

export interface BootOptions<R> {
  readonly reactors: ReadonlyArray<Reactor.ReactorDefinition<R>>
  readonly worker?: Worker.WorkerOptions
  /** `on-boot` (default): activate once reactors are parked; `manual`: the caller activates. */
  readonly activation?: "on-boot" | "manual"
  readonly retention?: Retention.RetentionOptions | false
  /** The timer loop (TimerLoop.ts); `false` leaves timers unfired (tools that only read). */
  readonly timers?: TimerLoop.TimerLoopOptions | false
}

/** What boot did, for the start-up line and /health. */
export class BootReport extends Context.Tag("orchestration/BootReport")<
  BootReport,
  {
    readonly reconciled: ReconcileReport
    readonly reactors: ReadonlyArray<Reactor.ReactorHandle>
  }
>() {}

export const policiesOf = (reactors: ReadonlyArray<Reactor.ReactorDefinition<any>>) => {
  const policies = new Map<string, Reactor.KindPolicy["onProcessLoss"]>()
  for (const reactor of reactors) {
    for (const [kind, policy] of Object.entries(reactor.kinds)) {
      if (policies.has(kind)) throw new Error(`effect kind '${kind}' is handled by two reactors`)
      policies.set(kind, policy.onProcessLoss)
    }
  }
  return policies
}

/** Requires an Engine built with `activation: "manual"`. */
export const layer = <R>(
  options: BootOptions<R>
): Layer.Layer<BootReport | Worker.Worker, StorageFailure | DispatchError | NodeIdInUse, Engine | SqlClient | R> => {
  const boot = Layer.scoped(
    BootReport,
    Effect.gen(function* () {
      const engine = yield* Engine
      const policies = policiesOf(options.reactors)
      // SQLite is held by this process alone, so every running row belongs to a dead owner. On a
      // shared store only this node's earlier incarnations are known dead (the node id is held).
      const backend = yield* StoreBackend
      const worker = yield* Worker.Worker
      const reconciled = yield* reconcileAfterProcessLoss({
        policies,
        ...(backend.shared ? { earlierIncarnationsOf: { nodeId: worker.nodeId, currentOwner: worker.ownerId } } : {})
      })
      const reactors: Array<Reactor.ReactorHandle> = []
      for (const definition of options.reactors) reactors.push(yield* Reactor.run(definition))
      // Parked like the reactors: its first round (overdue timers, earliest first) runs once activated.
      if (options.timers !== false) yield* TimerLoop.run(options.timers ?? {})
      if (options.activation !== "manual") yield* engine.activate
      return { reconciled, reactors }
    })
  )
  const withRetention = options.retention === false ? boot : Layer.merge(boot, Retention.layer(options.retention ?? {}))
  return withRetention.pipe(Layer.provideMerge(Worker.layer(options.worker)))
}
