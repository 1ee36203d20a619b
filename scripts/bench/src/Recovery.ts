/**
 * Recovery after process loss. A store is filled with `rows` effect rows left `running` by an owner
 * that is gone (bulk-loaded, see BulkLoad.ts), and then: (1) `reconcileAfterProcessLoss` over the parked engine settles them all,
 * timed; (2) a restart with a reactor is timed from opening the store to the first handler start.
 */
import { Boot, Engine, type Reactor, Reconcile, SqliteStore } from "@orchestration/engine"
import { Deferred, Effect, Layer } from "effect"
import { effectKind } from "./BenchDomain.js"
import { bulkLoad, createSchema } from "./BulkLoad.js"
import { benchConfig, engineLayer, runBench, storeFile } from "./EngineStack.js"
import { runJsonChild } from "./JsonChild.js"
import { nowMs } from "./Stats.js"

export interface RecoveryResult {
  readonly rows: number
  readonly reconcileMs: number
  readonly firstClaimAfterRestartMs: number
}

/** The rows a busy process would have left: committed, claimed by an owner that is gone. */
const fillDeadRows = async (dir: string, rows: number) => {
  await createSchema(dir)
  bulkLoad(dir, rows, { outboxStatus: "running", deadOwner: "dead-owner" })
}

const timeReconcile = (dir: string, rows: number) =>
  runBench(
    Effect.gen(function* () {
      const context = yield* Layer.build(engineLayer(dir, { activation: "manual" }))
      const start = nowMs()
      const report = yield* Reconcile.reconcileAfterProcessLoss({
        policies: new Map([[effectKind, "replay-safe" as const]])
      }).pipe(Effect.provide(context))
      const elapsed = nowMs() - start
      if (report.requeued !== rows)
        return yield* Effect.dieMessage(`reconcile requeued ${report.requeued} of ${rows} rows`)
      return elapsed
    })
  )

/** From "the process starts" (open, migrate, boot) to the reactor's first handler start on a due row. */
const timeFirstClaim = (dir: string) =>
  runBench(
    Effect.gen(function* () {
      const first = yield* Deferred.make<number>()
      const reactor: Reactor.ReactorDefinition = {
        name: "bench-reactor",
        kinds: { [effectKind]: { onProcessLoss: "replay-safe" as const, timeout: "1 minute" as const } },
        concurrency: 1,
        handle: () => Deferred.succeed(first, nowMs()).pipe(Effect.as({ ok: true }))
      }
      const start = nowMs()
      yield* Layer.build(
        Boot.layer({ reactors: [reactor], activation: "on-boot", retention: false }).pipe(
          Layer.provideMerge(Engine.layer({ ...benchConfig, activation: "manual" })),
          Layer.provideMerge(SqliteStore.layer({ filename: storeFile(dir), synchronous: "FULL" }))
        )
      )
      return (yield* Deferred.await(first)) - start
    })
  )

export const runRecovery = async (dir: string, rows: number): Promise<RecoveryResult> => {
  await fillDeadRows(dir, rows)
  const reconcileMs = await timeReconcile(dir, rows)
  const firstClaimAfterRestartMs = await timeFirstClaim(dir)
  return { rows, reconcileMs, firstClaimAfterRestartMs }
}

/**
 * `runRecovery` in a fresh process, as a node reconciles at boot: nothing of the engine compiled or
 * warmed by the measurements before it. Rounds in one process grow warmer: 10,000 rows took 950–1,060 ms
 * in a process's first reconcile and 770–880 ms in its second and third (2026-12-05, this machine), and
 * no boot is ever that warm.
 */
export const measureRecovery = (dir: string, rows: number): RecoveryResult =>
  runJsonChild<RecoveryResult>("RecoveryChild.js", [dir, String(rows)])
