/**
 * One benchmark process on PostgreSQL: `node Child.js <mode> <json options>`. It builds its stack,
 * warms up off the clock, prints `ready`, waits for `go` on stdin (so several processes start their
 * closed loops together), runs, and prints one JSON line with wall-clock start/end and latencies.
 * Modes: `dispatch` (dispatchWithReceipt), `e2e` (command → effect → outcome; it also reports the
 * pickup, acknowledgement → handler start), `dbos` (a DBOS workflow per command with one step, the
 * peer on the same database and workload), `reconcile` (settling `ops` rows a dead owner left running).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Boot, Engine, PostgresStore, type Reactor, Reconcile } from "@orchestration/engine"
import { Effect, Layer, Logger, LogLevel, type Scope, Stream } from "effect"
import { createInterface } from "node:readline"
import { bump, effectKind } from "../BenchDomain.js"
import { makeCompletions } from "../Completions.js"
import { benchConfig } from "../EngineStack.js"
import { closedLoop, closedLoopEffect, percentile, type RunResult } from "../Stats.js"

interface Options {
  readonly url: string
  readonly schema: string
  readonly clients: number
  readonly ops: number
  /** Distinguishes the command ids of processes that share a schema. */
  readonly tag: string
  /** dispatch: settled rows (a year's history) written in bulk before the warm-up. */
  readonly history?: number
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

const report = (run: RunResult, startedAt: number, extra: Record<string, number> = {}) => {
  process.stdout.write(
    `${JSON.stringify({
      ops: run.ops,
      seconds: run.seconds,
      startedAt,
      endedAt: startedAt + run.seconds * 1000,
      p50: percentile(run.latenciesMs, 50),
      p99: percentile(run.latenciesMs, 99),
      ...extra
    })}\n`
  )
}

// BENCH_PG_APPEND_LOCK=1 measures the schema-wide append lock that issue 20 replaced, on the same build.
const store = () =>
  PostgresStore.layer({
    url: options.url,
    schema: options.schema,
    maxConnections: 8,
    appendLock: process.env.BENCH_PG_APPEND_LOCK === "1"
  })

/**
 * `rows` commands' worth of engine rows (event, receipt, outbox row, read-model row; one aggregate and
 * lane each, as many independent commands leave), written by SQL in bulk: `succeeded` is settled
 * history, `running` rows claimed by an owner that is gone. Then ANALYZE, as autovacuum would have
 * done on a store that grew to this size.
 */
const loadRows = (sql: SqlClient, rows: number, status: "succeeded" | "running") =>
  Effect.gen(function* () {
    const now = Date.now()
    const running = status === "running"
    for (let from = 0; from < rows; from += 100_000) {
      const to = Math.min(rows, from + 100_000) - 1
      yield* sql`WITH e AS (
          INSERT INTO events (event_id, aggregate_type, aggregate_id, version, type, schema_version, payload, command_id, occurred_at)
          SELECT 'hist-' || i || '/e0', 'counter', 'h-' || i, 1, 'counter.bumped', 1, '{"type":"counter.bumped","n":' || i || '}', 'hist-' || i, ${now}
          FROM generate_series(${from}::int, ${to}::int) AS i RETURNING sequence, aggregate_id, command_id),
        r AS (INSERT INTO receipts (command_id, aggregate_type, aggregate_id, command_type, fingerprint, status, first_sequence,
            last_sequence, effect_ids, rejection, accepted_at)
          SELECT command_id, 'counter', aggregate_id, 'counter.bump', 'fp-' || command_id, 'accepted', sequence, sequence,
            '["' || command_id || ':0"]', NULL, ${now} FROM e)
        INSERT INTO bench_counters (counter_id, total, updated_seq) SELECT aggregate_id, 1, sequence FROM e`
      yield* sql`INSERT INTO outbox (effect_id, command_id, aggregate_type, aggregate_id, kind, payload, lane, status, attempts,
          available_at, lease_owner, lease_expires_at, response, created_at, updated_at)
        SELECT 'hist-' || i || ':0', 'hist-' || i, 'counter', 'h-' || i, ${effectKind}, '{"n":' || i || '}', 'counter:h-' || i,
          ${status}, 1, ${now}, ${running ? "dead-owner" : null}, ${running ? now + 60_000 : null},
          ${running ? null : '{"ok":true}'}, ${now}, ${now}
        FROM generate_series(${from}::int, ${to}::int) AS i`
    }
    yield* sql`ANALYZE`
  })

const dispatch = Effect.gen(function* () {
  const context = yield* Layer.build(Engine.layer(benchConfig).pipe(Layer.provideMerge(store())))
  const engine = yield* Effect.provide(Engine.Engine, context)
  if ((options.history ?? 0) > 0)
    yield* loadRows(yield* Effect.provide(SqlClient, context), options.history!, "succeeded")
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
  const completions = makeCompletions()
  const handledAt = new Map<string, number>()
  const pickupMs: Array<number> = []
  const reactor: Reactor.ReactorDefinition = {
    name: "bench-reactor",
    kinds: { [effectKind]: { onProcessLoss: "replay-safe" as const, timeout: "1 minute" as const } },
    concurrency: Math.max(1, options.clients),
    handle: (row: { readonly effectId: string }) =>
      Effect.sync(() => {
        handledAt.set(row.effectId, performance.now())
        return { ok: true }
      })
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
    Stream.runForEach((record) => completions.complete((record.payload as { readonly effectId: string }).effectId)),
    Effect.forkScoped
  )
  const once = (run: string, i: number, client: number) =>
    Effect.gen(function* () {
      const answer = yield* engine.dispatchWithReceipt(bump(run, i, client))
      const answeredAt = performance.now()
      const effectId = answer.effectIds[0]!
      // The handler may start before the client has its answer: that pickup is 0 ms for the client.
      const picked = () => {
        const handled = handledAt.get(effectId)
        if (handled !== undefined) pickupMs.push(Math.max(0, handled - answeredAt))
        handledAt.delete(effectId)
      }
      yield* completions.await(effectId)
      picked()
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
  pickupMs.length = 0
  const run = yield* closedLoopEffect(options.clients, options.ops, (i, c) => once(`${options.tag}-run`, i, c))
  report(run, startedAt, { pickupP50: percentile(pickupMs, 50) })
})

/**
 * `ops` rows left running by an owner that is gone (each its own aggregate, with its event, receipt
 * and read-model row), written by SQL in bulk; then reconcile over the parked engine, timed.
 */
const reconcile = Effect.gen(function* () {
  const context = yield* Layer.build(
    Engine.layer({ ...benchConfig, activation: "manual" }).pipe(Layer.provideMerge(store()))
  )
  const n = options.ops
  yield* loadRows(yield* Effect.provide(SqlClient, context), n, "running")
  yield* Effect.promise(go)
  const startedAt = Date.now()
  const start = performance.now()
  const result = yield* Reconcile.reconcileAfterProcessLoss({
    policies: new Map([[effectKind, "replay-safe" as const]])
  }).pipe(Effect.provide(context))
  const seconds = (performance.now() - start) / 1000
  if (result.requeued !== n) return yield* Effect.dieMessage(`reconcile requeued ${result.requeued} of ${n} rows`)
  report({ ops: n, seconds, latenciesMs: [seconds * 1000] }, startedAt)
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
  const program: Effect.Effect<void, unknown, Scope.Scope> =
    mode === "dispatch"
      ? dispatch
      : mode === "e2e"
        ? endToEnd
        : mode === "reconcile"
          ? reconcile
          : Effect.dieMessage(`unknown mode ${mode}`)
  await Effect.runPromise(program.pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Warning)))
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
