/**
 * `node dist/src/CpuPerCommand.js [ops] [only]`: what one command costs the engine, for work on the
 * write path (not part of `pnpm bench`).
 *
 * - CPU per command (process.cpuUsage, user + system) of dispatch at 1/16/256 clients and of reconcile,
 *   next to the raw floor, and how many commands shared a transaction. Less noisy than rates on a
 *   shared machine, but still inflated when the neighbours load both cores: compare runs made together.
 * - Effect steps per command (`only` = `steps`): every instruction the fiber runtime evaluates,
 *   counted by a supervisor. Deterministic, so a change that removes work shows exactly.
 *
 * `only`: `dispatch16`, `dispatch1`, `reconcile` or `steps` runs just that part.
 */
import { Reconcile } from "@orchestration/engine"
import { Effect, Layer, RuntimeFlags, RuntimeFlagsPatch, Supervisor } from "effect"
import { bump, effectKind } from "./BenchDomain.js"
import { bulkLoad, createSchema } from "./BulkLoad.js"
import { engineLayer, runBench } from "./EngineStack.js"
import { runFloor } from "./Floor.js"
import { warmedEngine } from "./Dispatch.js"
import { closedLoopEffect } from "./Stats.js"
import { withTempDir } from "./TempDir.js"

const ops = Number(process.argv[2] ?? 3000)
const only = process.argv[3]

const cpuMicros = () => {
  const usage = process.cpuUsage()
  return usage.user + usage.system
}

/** Counts the instructions the runtime evaluates while `counting.on`. */
class StepCounter extends Supervisor.AbstractSupervisor<void> {
  on = false
  steps = 0
  get value() {
    return Effect.void
  }
  override onEffect() {
    if (this.on) this.steps++
  }
}

/** Runs `program` with every instruction reported to `counter`. */
const counted = <A, E, R>(counter: StepCounter, program: Effect.Effect<A, E, R>) =>
  program.pipe(
    Effect.supervised(counter),
    Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision))
  )

const dispatch = (clients: number, maxBatch: number, counter?: StepCounter) =>
  withTempDir("cpu", (dir) =>
    runBench(
      Effect.gen(function* () {
        const engine = yield* warmedEngine(dir, clients, maxBatch)
        const before = yield* engine.stats
        const cpu0 = cpuMicros()
        if (counter) counter.on = true
        const run = yield* closedLoopEffect(clients, ops, (i, c) => engine.dispatchWithReceipt(bump("run", i, c)))
        if (counter) counter.on = false
        const cpu = cpuMicros() - cpu0
        const after = yield* engine.stats
        const transactions = after.transactions - before.transactions
        return { cpuPerCommand: cpu / ops, perSecond: ops / run.seconds, perTransaction: ops / transactions }
      }).pipe((program) => (counter ? counted(counter, program) : program))
    )
  )

const reconcile = (rows: number, counter?: StepCounter) =>
  withTempDir("cpu-reconcile", async (dir) => {
    await createSchema(dir)
    bulkLoad(dir, rows, { outboxStatus: "running", deadOwner: "dead-owner" })
    return runBench(
      Effect.gen(function* () {
        const context = yield* Layer.build(engineLayer(dir, { activation: "manual" }))
        const cpu0 = cpuMicros()
        const t0 = performance.now()
        if (counter) counter.on = true
        yield* Reconcile.reconcileAfterProcessLoss({ policies: new Map([[effectKind, "replay-safe" as const]]) }).pipe(
          Effect.provide(context)
        )
        if (counter) counter.on = false
        return { ms: performance.now() - t0, cpuPerRow: (cpuMicros() - cpu0) / rows }
      }).pipe((program) => (counter ? counted(counter, program) : program))
    )
  })

const line = (label: string, r: { cpuPerCommand: number; perSecond: number; perTransaction?: number }) =>
  console.log(
    `${label.padEnd(34)} cpu ${r.cpuPerCommand.toFixed(0).padStart(5)} µs/cmd  ${r.perSecond.toFixed(0).padStart(6)} cmd/s` +
      (r.perTransaction === undefined ? "" : `  ${r.perTransaction.toFixed(1)} cmd/tx`)
  )
const reconcileLine = (rows: number, r: { ms: number; cpuPerRow: number }) =>
  console.log(
    `reconcile ${rows} rows${" ".repeat(Math.max(0, 18 - String(rows).length))}${r.ms.toFixed(0)} ms, cpu ${r.cpuPerRow.toFixed(0)} µs/row`
  )

if (only === "steps") {
  const forDispatch = new StepCounter()
  await dispatch(16, 64, forDispatch)
  const forReconcile = new StepCounter()
  await reconcile(ops, forReconcile)
  console.log(
    `Effect steps: ${(forDispatch.steps / ops).toFixed(1)} per command (16 clients, group commit), ${(forReconcile.steps / ops).toFixed(1)} per reconciled row`
  )
} else if (only === "dispatch16") {
  line("engine 16 clients, group commit", await dispatch(16, 64))
} else if (only === "dispatch1") {
  line("engine 1 client, group commit", await dispatch(1, 64))
} else if (only === "reconcile") {
  reconcileLine(ops, await reconcile(ops))
} else {
  const floor = await withTempDir("cpu-floor", async (dir) => {
    const cpu0 = cpuMicros()
    const run = runFloor(dir, ops * 4, 64)
    return { cpuPerCommand: (cpuMicros() - cpu0) / (ops * 4), perSecond: run.ops / run.seconds }
  })
  line("floor, 64 per tx", floor)
  line("engine 16 clients, group commit", await dispatch(16, 64))
  line("engine 256 clients, group commit", await dispatch(256, 64))
  line("engine 1 client, group commit", await dispatch(1, 64))
  line("engine 16 clients, 1 per tx", await dispatch(16, 1))
  reconcileLine(2000, await reconcile(2000))
}
