/**
 * `pnpm sim --seed 123` replays one seed and prints its trace digest; `pnpm sim --seeds 1000 [--from N]
 * [--jobs J]` runs a range, replays a sample of it to prove the digests stable, and prints one summary
 * line. With `--jobs J` the range is cut into J contiguous slices, each run by its own process (a seed
 * depends on nothing but its number, so the slices give the seeds the same histories). A failure
 * prints its seed, the invariant and the last trace events, and exits non-zero.
 * `pnpm sim --seed 123 --shrink [--tries N]` shrinks a failing seed (Shrink.ts) and prints the reduced
 * case; `pnpm sim --seed 123 --case '<json>'` replays a seed under that reduction (Reduction.ts).
 */
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import type * as Reduction from "./Reduction.js"
import { describe as describeReduction } from "./Reduction.js"
import { shrink } from "./Shrink.js"
import { cleanup, runSeed, type SeedResult } from "./Simulation.js"

const args = process.argv.slice(2)
const option = (name: string) => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 ? Number(args[i + 1]) : undefined
}

const caseArgument = (reduction: Reduction.Reduction) => `--case '${JSON.stringify(reduction)}'`

const printFailure = (result: SeedResult, reduction?: Reduction.Reduction) => {
  const f = result.failure!
  process.stdout.write(`sim: FAILED seed=${result.seed} invariant=${f.invariant}\n  ${f.detail}\n  last events:\n`)
  for (const line of f.tail) process.stdout.write(`    ${line}\n`)
  const replay = `pnpm sim --seed ${result.seed}${reduction === undefined ? "" : ` ${caseArgument(reduction)}`}`
  process.stdout.write(`  replay: ${replay}\n`)
  if (reduction === undefined) process.stdout.write(`  shrink: pnpm sim --seed ${result.seed} --shrink\n`)
}

interface Totals {
  ran: number
  steps: number
  crashes: number
  faults: number
  failures: number
  stable: boolean
  /** User and system CPU time of the process(es) that ran the seeds. */
  cpuSeconds: number
}

/** One seed in fifty (counted from `base`, at least one per run) runs twice: the same seed must give the same digest. */
const runRange = (from: number, count: number, base: number, sampleEvery: number): Totals => {
  const cpuStarted = process.cpuUsage()
  const totals: Totals = { ran: 0, steps: 0, crashes: 0, faults: 0, failures: 0, stable: true, cpuSeconds: 0 }
  for (let seed = from; seed < from + count; seed++) {
    const result = runSeed(seed)
    totals.ran++
    totals.steps += result.steps
    totals.crashes += result.crashes
    totals.faults += result.faults
    if (result.failure !== undefined) {
      totals.failures++
      printFailure(result)
      break
    }
    if ((seed - base) % sampleEvery === 0) {
      const again = runSeed(seed)
      if (again.digest !== result.digest) {
        totals.stable = false
        process.stdout.write(`sim: seed ${seed} gave digest ${result.digest}, then ${again.digest}\n`)
      }
    }
  }
  cleanup()
  const cpu = process.cpuUsage(cpuStarted)
  totals.cpuSeconds = (cpu.user + cpu.system) / 1e6
  return totals
}

/** Runs one slice in a child process; its last line is its totals as JSON, everything before it is passed on. */
const runSlice = (from: number, count: number, base: number, sampleEvery: number) =>
  new Promise<Totals>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        ...process.execArgv,
        fileURLToPath(import.meta.url),
        "--slice",
        String(from),
        String(count),
        String(base),
        String(sampleEvery)
      ],
      { stdio: ["ignore", "pipe", "inherit"] }
    )
    let out = ""
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (chunk: string) => {
      out += chunk
      const lines = out.split("\n")
      out = lines.pop()!
      for (const line of lines) {
        if (line.startsWith("sim-slice: ")) resolve(JSON.parse(line.slice("sim-slice: ".length)) as Totals)
        else process.stdout.write(`${line}\n`)
      }
    })
    child.on("exit", (code) => reject(new Error(`sim slice from ${from} ended with code ${code} before its totals`)))
  })

const slice = args.indexOf("--slice")
const single = option("seed")
const caseAt = args.indexOf("--case")
const reduction = caseAt >= 0 ? (JSON.parse(args[caseAt + 1] ?? "{}") as Reduction.Reduction) : undefined
if (slice >= 0) {
  const [from, count, base, sampleEvery] = args.slice(slice + 1, slice + 5).map(Number) as [
    number,
    number,
    number,
    number
  ]
  process.stdout.write(`sim-slice: ${JSON.stringify(runRange(from, count, base, sampleEvery))}\n`)
} else if (single !== undefined && args.includes("--shrink")) {
  const tries = option("tries") ?? 300
  process.stdout.write(`sim: shrinking seed=${single} (at most ${tries} runs)\n`)
  const shrunk = shrink(single, { maxTries: tries })
  cleanup()
  if (shrunk === undefined) {
    process.stdout.write(`sim: seed=${single} does not fail; nothing to shrink\n`)
  } else {
    const { original: o, shrunk: s, reduction: r } = shrunk
    process.stdout.write(
      `sim: shrunk seed=${single} invariant=${o.failure!.invariant} steps=${o.steps}->${s.steps} crashes=${o.crashes}->${s.crashes} faults=${o.faults}->${s.faults} tries=${shrunk.tries} (${describeReduction(r)})\n`
    )
    printFailure(s, r)
    process.exit(1)
  }
} else if (single !== undefined) {
  const result = runSeed(single, reduction === undefined ? {} : { reduction })
  cleanup()
  if (result.failure !== undefined) {
    printFailure(result, reduction)
    process.exit(1)
  }
  process.stdout.write(
    `sim: seed=${single} steps=${result.steps} crashes=${result.crashes} faults=${result.faults} sim_time=${Math.round(result.simMs / 1000)}s digest=${result.digest}\n`
  )
} else {
  const count = option("seeds") ?? 100
  const from = option("from") ?? 1
  const jobs = Math.max(1, Math.min(option("jobs") ?? 1, count))
  const sampleEvery = Math.max(1, Math.min(50, count))
  const started = performance.now()
  let totals: Totals
  if (jobs === 1) totals = runRange(from, count, from, sampleEvery)
  else {
    const slices: Array<Promise<Totals>> = []
    for (let j = 0, next = from; j < jobs; j++) {
      const size = Math.floor(count / jobs) + (j < count % jobs ? 1 : 0)
      slices.push(runSlice(next, size, from, sampleEvery))
      next += size
    }
    const parts = await Promise.all(slices)
    totals = parts.reduce((a, b) => ({
      ran: a.ran + b.ran,
      steps: a.steps + b.steps,
      crashes: a.crashes + b.crashes,
      faults: a.faults + b.faults,
      failures: a.failures + b.failures,
      stable: a.stable && b.stable,
      cpuSeconds: a.cpuSeconds + b.cpuSeconds
    }))
  }
  const seconds = (performance.now() - started) / 1000
  process.stdout.write(
    `sim: seeds=${totals.ran} steps=${totals.steps} crashes=${totals.crashes} faults=${totals.faults} failures=${totals.failures} digest_stable=${totals.stable ? "yes" : "no"} (${seconds.toFixed(1)} s, ${(totals.ran / seconds).toFixed(1)} seeds/s, jobs=${jobs}, ${totals.cpuSeconds.toFixed(1)} s CPU)\n`
  )
  if (totals.failures > 0 || !totals.stable) process.exit(1)
}
