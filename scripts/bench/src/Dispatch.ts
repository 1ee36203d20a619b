/**
 * Engine dispatch: commands/s and acknowledgement latency through `dispatchWithReceipt` with a
 * number of concurrent clients, group commit off (maxBatch 1) or on (default 64), over the engine's
 * own SQLite client or @effect/sql-sqlite-node's. The store is new for every run and the layer is
 * built before the clock starts.
 */
import { Engine } from "@orchestration/engine"
import { Effect, Layer } from "effect"
import { bump } from "./BenchDomain.js"
import { engineLayer, runBench, type StoreClient } from "./EngineStack.js"
import { closedLoopEffect, type RunResult } from "./Stats.js"

/** An engine over a new store in `dir`, each client's state and the statement cache warmed off the clock. */
export const warmedEngine = (
  dir: string,
  clients: number,
  maxBatch: number,
  client: StoreClient = "default",
  label = "run"
) =>
  Effect.gen(function* () {
    const context = yield* Layer.build(engineLayer(dir, { maxBatch }, client))
    const engine = yield* Effect.provide(Engine.Engine, context)
    yield* Effect.forEach(
      Array.from({ length: clients }, (_, c) => c),
      (c) => engine.dispatchWithReceipt(bump(`${label}-warm`, c, c)),
      { concurrency: "unbounded", discard: true }
    )
    return engine
  })

export const runDispatch = (
  dir: string,
  clients: number,
  ops: number,
  maxBatch: number,
  client: StoreClient = "default",
  /** Prefix of the command ids: runs over one store need distinct ones, or they measure stored answers. */
  label = "run"
): Promise<RunResult> =>
  runBench(
    Effect.gen(function* () {
      const engine = yield* warmedEngine(dir, clients, maxBatch, client, label)
      return yield* closedLoopEffect(clients, ops, (i, c) => engine.dispatchWithReceipt(bump(label, i, c)))
    })
  )
