/**
 * One benchmark process on PostgreSQL: `node Child.js <mode> <json options>`. It builds its stack,
 * warms up off the clock, prints `ready`, waits for `go` on stdin (so several processes start their
 * closed loops together), runs, and prints one JSON line with wall-clock start/end and latencies.
 * Modes: `dispatch` (dispatchWithReceipt), `e2e` (command → effect → outcome), `dbos` (a DBOS
 * workflow per command with one step, the peer on the same database and workload).
 */
import { Boot, Engine, PostgresStore, type Reactor } from "@orchestration/engine"
import { Deferred, Effect, Layer, Logger, LogLevel, Stream } from "effect"
import { createInterface } from "node:readline"
import { bump, effectKind } from "../BenchDomain.js"
import { benchConfig } from "../EngineStack.js"
import { closedLoop, closedLoopEffect, percentile, type RunResult } from "../Stats.js"

interface Options {
  readonly url: string
  readonly schema: string
  readonly clients: number
  readonly ops: number
  /** Distinguishes the command ids of processes that share a schema. */
  readonly tag: string
}

const mode = process.argv[2]
const options = JSON.parse(process.argv[3] ?? "{}") as Options

const go = () =>
  new Promise<void>((resolve) => {
    process.stdout.write("ready\n")
    const lines = createInterface({ input: process.stdin })
    lines.on("line", (line) => {
      if (line.trim() === "go") {
        lines.close()
        resolve()
      }
    })
  })

const report = (run: RunResult, startedAt: number) => {
  process.stdout.write(
    `${JSON.stringify({
      ops: run.ops,
      seconds: run.seconds,
      startedAt,
      endedAt: startedAt + run.seconds * 1000,
      p50: percentile(run.latenciesMs, 50),
      p99: percentile(run.latenciesMs, 99)
    })}\n`
  )
}

const store = () => PostgresStore.layer({ url: options.url, schema: options.schema, maxConnections: 8 })

const dispatch = Effect.gen(function* () {
  const context = yield* Layer.build(Engine.layer(benchConfig).pipe(Layer.provideMerge(store())))
  const engine = yield* Effect.provide(Engine.Engine, context)
  const c = Array.from({ length: options.clients }, (_, i) => i)
  yield* Effect.forEach(
    c,
    (i) =>
      engine.dispatchWithReceipt(
        bump(`${options.tag}-warm`, i, i + 1000 * Number(options.tag.replace(/\D/g, "") || 0))
      ),
    {
      concurrency: "unbounded",
      discard: true
    }
  )
  yield* Effect.promise(go)
  const startedAt = Date.now()
  const run = yield* closedLoopEffect(options.clients, options.ops, (i, client) =>
    engine.dispatchWithReceipt(
      bump(`${options.tag}-run`, i, client + 1000 * Number(options.tag.replace(/\D/g, "") || 0))
    )
  )
  report(run, startedAt)
})

const endToEnd = Effect.gen(function* () {
  const done = new Map<string, Deferred.Deferred<void>>()
  const early = new Set<string>()
  const reactor: Reactor.ReactorDefinition = {
    name: "bench-reactor",
    kinds: { [effectKind]: { onProcessLoss: "replay-safe" as const, timeout: "1 minute" as const } },
    concurrency: Math.max(1, options.clients),
    handle: () => Effect.succeed({ ok: true })
  }
  const stack = Boot.layer({
    reactors: [reactor],
    activation: "on-boot",
    retention: false,
    worker: { nodeId: `bench-${options.tag}` }
  }).pipe(Layer.provideMerge(Engine.layer({ ...benchConfig, activation: "manual" })), Layer.provideMerge(store()))
  const context = yield* Layer.build(stack)
  const engine = yield* Effect.provide(Engine.Engine, context)
  yield* engine.followEvents().pipe(
    Stream.filter((record) => record.type === "counter.effect-done"),
    Stream.runForEach((record) =>
      Effect.suspend(() => {
        const effectId = (record.payload as { readonly effectId: string }).effectId
        const waiter = done.get(effectId)
        if (waiter === undefined) {
          early.add(effectId)
          return Effect.void
        }
        done.delete(effectId)
        return Deferred.succeed(waiter, undefined)
      })
    ),
    Effect.forkScoped
  )
  const once = (run: string, i: number, client: number) =>
    Effect.gen(function* () {
      const answer = yield* engine.dispatchWithReceipt(bump(run, i, client))
      const effectId = answer.effectIds[0]!
      if (early.delete(effectId)) return
      const waiter = yield* Deferred.make<void>()
      done.set(effectId, waiter)
      if (early.delete(effectId)) return
      yield* Deferred.await(waiter)
    })
  yield* Effect.forEach(
    Array.from({ length: options.clients }, (_, c) => c),
    (c) => once(`${options.tag}-warm`, c, c),
    {
      concurrency: "unbounded",
      discard: true
    }
  )
  yield* Effect.promise(go)
  const startedAt = Date.now()
  const run = yield* closedLoopEffect(options.clients, options.ops, (i, c) => once(`${options.tag}-run`, i, c))
  report(run, startedAt)
})

const dbos = async () => {
  const { DBOS } = await import("@dbos-inc/dbos-sdk")
  DBOS.setConfig({
    name: "bench",
    systemDatabaseUrl: options.url,
    systemDatabaseSchemaName: `dbos_${options.schema}`,
    logLevel: "error",
    runAdminServer: false
  })
  // One step per effect; the step does what our reactor's handler does (nothing but answer).
  const effect = DBOS.registerStep(async (n: number) => ({ ok: true, n }), { name: "bench-effect" })
  const workflow = DBOS.registerWorkflow(
    async (n: number) => {
      await effect(n)
      return n
    },
    { name: "bench-command" }
  )
  await DBOS.launch()
  const once = async (id: string, n: number) => {
    const handle = await DBOS.startWorkflow(workflow, { workflowID: id })(n)
    await handle.getResult()
  }
  await Promise.all(Array.from({ length: options.clients }, (_, c) => once(`${options.tag}-warm-${c}`, c)))
  await go()
  const startedAt = Date.now()
  const run = await closedLoop(options.clients, options.ops, (i) => once(`${options.tag}-run-${i}`, i))
  report(run, startedAt)
  await DBOS.shutdown()
}

const main = async () => {
  if (mode === "dbos") return dbos()
  const program = mode === "dispatch" ? dispatch : mode === "e2e" ? endToEnd : Effect.dieMessage(`unknown mode ${mode}`)
  await Effect.runPromise(program.pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Warning)))
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
