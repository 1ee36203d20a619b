/**
 * `pnpm bench [--quick]`: runs every measurement family, interleaving the baselines with
 * the engine round by round, prints the table, writes docs/benchmarks.md and ends with one summary
 * line for scripts. Progress goes to stderr.
 */
import { fileURLToPath } from "node:url"
import { runDispatch } from "./Dispatch.js"
import { runEffectSqlFloor } from "./EffectSqlFloor.js"
import { runEmmett } from "./Emmett.js"
import { runEndToEnd } from "./EndToEnd.js"
import { runFloor } from "./Floor.js"
import { runFsync } from "./Fsync.js"
import { describeMachine } from "./Machine.js"
import { full, quick } from "./Profile.js"
import { progress } from "./Progress.js"
import { measureRecovery } from "./Recovery.js"
import { renderMarkdown, Results, writeDoc, type Ratio } from "./Report.js"
import { loadScaleStore, measureScale } from "./Scale.js"
import { runStreaming } from "./Streaming.js"
import { runTimerLateness } from "./TimerLateness.js"
import { fmt } from "./Stats.js"
import { withTempDir, withTempDirs } from "./TempDir.js"
import { runWorkflow } from "./Workflow.js"

const profile = process.argv.includes("--quick") ? quick : full
const results = new Results()
const machine = describeMachine()
progress(`profile ${profile.name}: ${profile.rounds} rounds, ${machine.cpus} CPUs, node ${machine.node}`)

/** A peer that cannot run here is reported as such, with its error, never with made-up numbers. */
const peerFailures = new Map<string, string>()
const peer = async (name: string, run: () => Promise<void>) => {
  if (peerFailures.has(name)) return
  try {
    await run()
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    peerFailures.set(name, message)
    progress(`${name} failed: ${message}`)
    results.notes.push(`${name} could not run: ${message}`)
  }
}

/** The same dispatch workload over the stock client an application may hand in (SqliteStore.layerOver). */
const STOCK_CLIENT = "engine dispatch over @effect/sql-sqlite-node, 16 clients, group commit on"

const emmettErrors: Record<string, Record<string, number>> = {}
const emmettTotals: Record<string, { stored: number; attempted: number }> = {}

for (let round = 1; round <= profile.rounds; round++) {
  progress(`round ${round}/${profile.rounds}: floor and fsync`)
  results.addRun(
    "floor, 1 tx per command",
    "cmd/s",
    await withTempDir("floor", async (dir) => runFloor(dir, profile.floorOps, 1))
  )
  results.addRun(
    "floor, 64 per tx",
    "cmd/s",
    await withTempDir("floor", async (dir) => runFloor(dir, profile.floorOps * 4, 64)),
    []
  )
  results.addRun(
    "floor through @effect/sql, 64 per tx",
    "cmd/s",
    await withTempDir("floor", (dir) => runEffectSqlFloor(dir, profile.floorOps * 2, 64)),
    []
  )
  results.addRun(
    "fsync (4 KiB write + fdatasync)",
    "op/s",
    await withTempDir("fsync", async (dir) => runFsync(dir, profile.fsyncOps))
  )

  for (const clients of profile.clients) {
    for (const [label, maxBatch] of [
      ["off", 1],
      ["on", 64]
    ] as const) {
      progress(`round ${round}: engine dispatch, ${clients} clients, group commit ${label}`)
      const ops = label === "off" ? profile.dispatchOps.off : profile.dispatchOps.on
      const run = await withTempDir("dispatch", (dir) =>
        runDispatch(dir, clients, Math.max(ops, clients * 2), maxBatch)
      )
      results.addRun(`engine dispatch, ${clients} clients, group commit ${label}`, "cmd/s", run)
    }
  }
  progress(`round ${round}: engine dispatch over @effect/sql-sqlite-node, 16 clients, group commit on`)
  results.addRun(
    STOCK_CLIENT,
    "cmd/s",
    await withTempDir("dispatch", (dir) => runDispatch(dir, 16, profile.dispatchOps.on, 64, "sqlite-node"))
  )

  progress(`round ${round}: end to end and pickup`)
  for (const clients of [1, 16]) {
    const run = await withTempDir("e2e", (dir) =>
      runEndToEnd(dir, clients, clients === 1 ? profile.pickupOps : profile.endToEndOps)
    )
    results.addRun(`end to end (command → effect → outcome), ${clients} clients`, "cmd/s", run)
    if (clients === 1) results.addLatencies("pickup (commit → claim), 1 client", run.pickupMs)
  }
  progress(`round ${round}: timer lateness`)
  results.addLatencies(
    "timer lateness (fire − due), 40 timers 25 ms apart",
    await withTempDir("timers", (dir) => runTimerLateness(dir))
  )

  if (round <= profile.peerRounds) {
    for (const clients of [1, 16] as const) {
      progress(`round ${round}: @effect/workflow, ${clients} clients`)
      await peer("@effect/workflow", async () => {
        const run = await withTempDir("workflow", (dir) => runWorkflow(dir, clients, profile.workflowOps[clients]))
        results.addRun(`@effect/workflow end to end, ${clients} clients`, "wf/s", run)
      })
    }
  }

  for (const clients of [1, 16] as const) {
    // Sequential Emmett is cheap enough for every round; 16 clients mostly wait on its errors.
    if (clients === 16 && round > profile.peerRounds) continue
    progress(`round ${round}: Emmett, ${clients} clients`)
    await peer("Emmett", async () => {
      const run = await withTempDir("emmett", (dir) => runEmmett(dir, clients, profile.emmettOps[clients]))
      results.addRun(`Emmett CommandHandler, ${clients} clients`, "cmd/s", run)
      const totals = (emmettTotals[clients] ??= { stored: 0, attempted: 0 })
      totals.stored += run.succeeded
      totals.attempted += profile.emmettOps[clients]
      const errors = (emmettErrors[clients] ??= {})
      for (const [key, n] of Object.entries(run.errors)) errors[key] = (errors[key] ?? 0) + n
    })
  }
}

for (const rows of profile.reconcileRows) {
  const rounds = rows === profile.reconcileRows[0] ? profile.reconcileRounds : 1
  for (let round = 1; round <= rounds; round++) {
    progress(`recovery: filling ${rows} dead running rows, reconciling, restarting (round ${round} of ${rounds})`)
    const result = await withTempDir("recovery", (dir) => Promise.resolve(measureRecovery(dir, rows)))
    results.addValue(`reconcile ${rows} dead running rows`, "ms", result.reconcileMs)
    results.addValue(`first claim after restart (${rows} rows just requeued)`, "ms", result.firstClaimAfterRestartMs)
    progress(
      `recovery ${rows}: reconcile ${fmt(result.reconcileMs)} ms, first claim ${fmt(result.firstClaimAfterRestartMs, 1)} ms`
    )
  }
}

// 64 streams, the target's size (p99 < 100 ms), runs three rounds in a full run: one round's p99 swung
// by tens of ms from run to run, so the table gives its min/median/max.
const streamingRuns = [1, 16, ...Array.from({ length: profile.name === "quick" ? 1 : 3 }, () => 64)]
for (const streams of streamingRuns) {
  const seconds = profile.name === "quick" ? 3 : 10
  progress(`streaming: ${streams} concurrent streams of 50 tokens/s for ${seconds} s, one SSE reader each`)
  const r = await withTempDir("streaming", (dir) => runStreaming(dir, streams, seconds))
  const label = `streaming, ${streams} × 50 tokens/s`
  if (streams === 64) {
    results.addValue(`${label}: delta latency p99, each stream's first 0.5 s`, "ms", r.phaseP99Ms.start)
    results.addValue(`${label}: delta latency p99, each stream's last 0.5 s`, "ms", r.phaseP99Ms.end)
    results.addValue(`${label}: the worst client's own delta latency p99`, "ms", r.clientP99Ms.worst)
  }
  results.addValue(`${label}: delta latency p50 (provider → SSE)`, "ms", r.latencyP50Ms)
  results.addValue(`${label}: delta latency p99 (provider → SSE)`, "ms", r.latencyP99Ms)
  results.addValue(`${label}: latency after the flush window ends, p99`, "ms", r.afterWindowP99Ms)
  results.addValue(`${label}: CPU of the process`, "ms/s", r.cpuMsPerSecond)
  results.addValue(`${label}: deltas delivered`, "deltas/s", r.deltasPerSecond)
  results.addValue(`${label}: transactions`, "commits/s", r.transactionsPerSecond)
  results.addValue(`${label}: chunk commits`, "chunks/s", r.commitsPerSecond)
  results.addValue(`${label}: write amplification (bytes written / streamed)`, "x", r.writeAmplification)
  results.addValue(`${label}: peak RSS`, "MiB", r.peakRssMb)
  progress(
    `streaming ${streams}: latency p50 ${fmt(r.latencyP50Ms, 1)} ms, p99 ${fmt(r.latencyP99Ms, 1)} ms, ` +
      `max ${fmt(r.latencyMaxMs, 1)} ms; ${fmt(r.deltasPerSecond)} deltas/s, ${fmt(r.transactionsPerSecond)} ` +
      `transactions/s, ${fmt(r.commitsPerSecond)} chunks/s, write amplification ${fmt(r.writeAmplification)}x, ` +
      `RSS ${fmt(r.peakRssMb)} MiB, ${fmt(r.seconds, 1)} s`
  )
}

// Every size is loaded first and measured in interleaved rounds, so a neighbour's disk burst falls on
// all sizes alike; each round is a fresh process with command ids of its own.
const scaleSizes = [0, ...profile.scaleRows]
const scaleLabel = (rows: number) => `dispatch after ${rows.toLocaleString("en-US")} settled rows, 16 clients`
await withTempDirs("scale", scaleSizes.length, async (dirs) => {
  for (const [i, rows] of scaleSizes.entries()) {
    progress(`scale: loading ${rows} settled rows`)
    await loadScaleStore(dirs[i]!, rows)
  }
  const p50 = new Map<number, Array<number>>()
  const p99 = new Map<number, Array<number>>()
  for (let round = 1; round <= profile.scaleRounds; round++) {
    for (const [i, rows] of scaleSizes.entries()) {
      progress(`scale round ${round}/${profile.scaleRounds}: ${rows} settled rows, dispatch at 16 clients`)
      const result = measureScale(dirs[i]!, rows, profile.scaleOps, `scale${round}`)
      results.addValue(scaleLabel(rows), "cmd/s", result.perSecond)
      results.addValue(`resident memory after ${rows.toLocaleString("en-US")} settled rows`, "MB", result.rssMb)
      p50.set(rows, [...(p50.get(rows) ?? []), result.p50Ms])
      p99.set(rows, [...(p99.get(rows) ?? []), result.p99Ms])
    }
  }
  const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  for (const rows of scaleSizes) {
    results.setNote(
      scaleLabel(rows),
      `p50 ${fmt(median(p50.get(rows)!), 2)} ms, p99 ${fmt(median(p99.get(rows)!), 2)} ms (medians of rounds)`
    )
  }
})

for (const [clients, errors] of Object.entries(emmettErrors)) {
  const text = Object.entries(errors)
    .map(([k, n]) => `${k} ×${n}`)
    .join(", ")
  const totals = emmettTotals[clients]
  const stored = totals === undefined ? "" : `stored ${totals.stored} of ${totals.attempted}; `
  results.setNote(
    `Emmett CommandHandler, ${clients} clients`,
    stored + (text === "" ? "no errors" : `errors (not counted as throughput): ${text}`)
  )
}
results.setNote("floor, 64 per tx", "rate only")
results.setNote("floor through @effect/sql, 64 per tx", "same statements via @effect/sql-sqlite-node; rate only")
results.setNote("pickup (commit → claim), 1 client", "value = p50")
results.setNote(
  "timer lateness (fire − due), 40 timers 25 ms apart",
  "value = p50; the timer loop sleeps to the due time (TimerLateness.ts); target p99 < 50 ms on an idle machine"
)
results.setNote(STOCK_CLIENT, "SqliteStore.layerOver with SqliteClient.layer: every statement through @effect/sql")
results.notes.push(
  "Engine dispatch: each client sends to its own aggregate (state served from the cache); every command writes one event, one projection upsert, one outbox row and its receipt, the same writes as the floor.",
  "End to end: a reactor performs the effect (a no-op) and the outcome is committed through the front door as a second event; the client waits for that event on followEvents.",
  "@effect/workflow: SingleRunner, SQL message storage on SQLite (WAL, synchronous FULL by default), shardingConfig defaults; one workflow with one Activity per command.",
  "Emmett: getSQLiteEventStore on the sqlite3 driver with its default pragmas; one stream per client; failed commands are counted, not retried.",
  `Recovery: dead running rows are bulk-loaded (claimed by an owner that is gone); reconcile runs over the parked engine, in a fresh process as at boot (${profile.reconcileRounds} round(s) of the smallest size, one of each larger); first claim is timed from opening the store to the reactor's first handler start.`,
  `Sizes: recovery ${profile.reconcileRows.join(", ")} rows; scale ${profile.scaleRows.join(", ")} settled rows (bulk-loaded into the engine's tables, then measured by a fresh process per round: ${profile.scaleRounds} interleaved rounds of ${profile.scaleOps} commands).`
)

const ratio = (a: string, b: string) => results.median(a) / results.median(b)
// The quick profile reconciles fewer rows; its 10k figure is scaled linearly and labelled as such.
const measured10k = results.median("reconcile 10000 dead running rows")
const smallest = profile.reconcileRows[0]!
const reconcile10k = Number.isFinite(measured10k)
  ? measured10k
  : (results.median(`reconcile ${smallest} dead running rows`) * 10_000) / smallest
if (!Number.isFinite(measured10k)) {
  results.notes.push(
    `reconcile_10k_ms is scaled ×${10_000 / smallest} from the ${smallest}-row measurement (quick profile); the full run measures 10,000 rows.`
  )
}
const ratios: Array<Ratio> = []
const add = (name: string, value: number, target: string, threshold: number | undefined, lowerIsBetter = false) =>
  ratios.push({
    name,
    value,
    target,
    met:
      threshold === undefined || !Number.isFinite(value)
        ? undefined
        : lowerIsBetter
          ? value < threshold
          : value >= threshold
  })
add(
  "engine_vs_floor (engine 16 clients group commit ÷ floor 64 per tx)",
  ratio("engine dispatch, 16 clients, group commit on", "floor, 64 per tx"),
  "≥ 0.5",
  0.5
)
add(
  "group_commit_gain (16 clients, on ÷ off)",
  ratio("engine dispatch, 16 clients, group commit on", "engine dispatch, 16 clients, group commit off"),
  "≥ 5",
  5
)
add("pickup_p50_ms", results.median("pickup (commit → claim), 1 client"), "< 1.5 ms", 1.5, true)
add(
  Number.isFinite(measured10k) ? "reconcile_10k_ms" : `reconcile_10k_ms (scaled from ${smallest} rows)`,
  reconcile10k,
  "< 800 ms",
  800,
  true
)
add(
  "vs_workflow (end to end 16 clients ÷ workflows/s 16 clients)",
  ratio("end to end (command → effect → outcome), 16 clients", "@effect/workflow end to end, 16 clients"),
  "≥ 20",
  20
)
add(
  "vs_emmett (dispatch 1 client ÷ Emmett 1 client)",
  ratio("engine dispatch, 1 clients, group commit on", "Emmett CommandHandler, 1 clients"),
  "≥ 10",
  10
)
const largestScale = profile.scaleRows[profile.scaleRows.length - 1]!
add(
  `flat_history (dispatch after ${largestScale.toLocaleString("en-US")} settled rows ÷ after 0, medians of rounds)`,
  ratio(scaleLabel(largestScale), scaleLabel(0)),
  "≥ 0.9",
  0.9
)
add(
  "floor through @effect/sql ÷ raw floor, 64 per tx",
  ratio("floor through @effect/sql, 64 per tx", "floor, 64 per tx"),
  "(context)",
  undefined
)
add(
  "stock @effect/sql-sqlite-node client ÷ default client (dispatch, 16 clients, group commit on)",
  ratio(STOCK_CLIENT, "engine dispatch, 16 clients, group commit on"),
  "(context)",
  undefined
)
add(
  "engine tx per command ÷ floor 1 tx per command (16 clients, off)",
  ratio("engine dispatch, 16 clients, group commit off", "floor, 1 tx per command"),
  "(context)",
  undefined
)
add(
  "floor 1 tx per command ÷ fsync",
  ratio("floor, 1 tx per command", "fsync (4 KiB write + fdatasync)"),
  "(context)",
  undefined
)

const num = (value: number, digits: number) => (Number.isFinite(value) ? value.toFixed(digits) : "n/a")
const summary = `bench: engine_vs_floor=${num(ratios[0]!.value, 2)} group_commit_gain=${num(ratios[1]!.value, 2)} pickup_p50_ms=${num(
  ratios[2]!.value,
  2
)} reconcile_10k_ms=${num(reconcile10k, 0)} vs_workflow=${num(ratios[4]!.value, 2)} vs_emmett=${num(ratios[5]!.value, 2)} flat_history=${num(ratios[6]!.value, 2)}`

const markdown = renderMarkdown(profile.name, machine, results, ratios, summary)
const docPath = fileURLToPath(new URL("../../../../docs/benchmarks.md", import.meta.url))
writeDoc(docPath, profile.name, markdown)
progress(`wrote ${docPath} (${profile.name} section)`)
process.stdout.write(`\n${markdown}\n`)
process.stdout.write(`${summary}\n`)
