/**
 * End to end: command → effect performed by a reactor → outcome committed (the aggregate's
 * `counter.effect-done` event, seen through `followEvents`). Also the doorbell: the time from the
 * command's acknowledgement (its commit) to the reactor's handler starting on the claimed row.
 */
import { Boot, Engine, type Reactor, SqliteStore } from "@orchestration/engine"
import { Effect, Layer, Stream } from "effect"
import { benchConfig, storeFile, runBench } from "./EngineStack.js"
import { makeCompletions } from "./Completions.js"
import { bump, effectKind } from "./BenchDomain.js"
import { closedLoopEffect, nowMs, type RunResult } from "./Stats.js"

export interface EndToEndResult extends RunResult {
  /** Acknowledgement → handler start, per command (ms). */
  readonly pickupMs: ReadonlyArray<number>
}

export const runEndToEnd = (dir: string, clients: number, ops: number): Promise<EndToEndResult> =>
  runBench(
    Effect.gen(function* () {
      const handledAt = new Map<string, number>()
      const reactor: Reactor.ReactorDefinition = {
        name: "bench-reactor",
        kinds: { [effectKind]: { onProcessLoss: "replay-safe" as const, timeout: "1 minute" as const } },
        // As many rows at once as there are clients, so the reactor is never the queue.
        concurrency: Math.max(1, clients),
        handle: (row: { readonly effectId: string }) =>
          Effect.sync(() => {
            handledAt.set(row.effectId, nowMs())
            return { ok: true }
          })
      }
      const stack = Boot.layer({ reactors: [reactor], activation: "on-boot", retention: false }).pipe(
        Layer.provideMerge(Engine.layer({ ...benchConfig, activation: "manual" })),
        Layer.provideMerge(SqliteStore.layer({ filename: storeFile(dir), synchronous: "FULL" }))
      )
      const context = yield* Layer.build(stack)
      const engine = yield* Effect.provide(Engine.Engine, context)
      const completions = makeCompletions()
      yield* engine.followEvents().pipe(
        Stream.filter((record) => record.type === "counter.effect-done"),
        Stream.runForEach((record) => completions.complete((record.payload as { readonly effectId: string }).effectId)),
        Effect.forkScoped
      )
      const pickupMs: Array<number> = []
      const once = (run: string, i: number, c: number) =>
        Effect.gen(function* () {
          const answer = yield* engine.dispatchWithReceipt(bump(run, i, c))
          const answeredAt = nowMs()
          const effectId = answer.effectIds[0]
          if (effectId === undefined) return yield* Effect.dieMessage("end to end: the command decided no effect")
          yield* completions.await(effectId)
          const handled = handledAt.get(effectId)
          // The handler may start before the client has seen its answer: that pickup is 0 ms for the client.
          if (handled !== undefined && run === "run") pickupMs.push(Math.max(0, handled - answeredAt))
          handledAt.delete(effectId)
        })
      yield* Effect.forEach(
        Array.from({ length: clients }, (_, c) => c),
        (c) => once("warm", c, c),
        { concurrency: "unbounded", discard: true }
      )
      const result = yield* closedLoopEffect(clients, ops, (i, c) => once("run", i, c))
      return { ...result, pickupMs }
    })
  )
