/**
 * `pnpm sim --seed 123` replays one seed and prints its trace digest; `pnpm sim --seeds 1000 [--from N]`
 * runs a range, replays a sample of it to prove the digests stable, and prints one summary line.
 * A failure prints its seed, the invariant and the last trace events, and exits non-zero.
 */
import { cleanup, runSeed, type SeedResult } from "./Simulation.js"

const args = process.argv.slice(2)
const option = (name: string) => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 ? Number(args[i + 1]) : undefined
}

const printFailure = (result: SeedResult) => {
  const f = result.failure!
  process.stdout.write(`sim: FAILED seed=${result.seed} invariant=${f.invariant}\n  ${f.detail}\n  last events:\n`)
  for (const line of f.tail) process.stdout.write(`    ${line}\n`)
  process.stdout.write(`  replay: pnpm sim --seed ${result.seed}\n`)
}

const single = option("seed")
if (single !== undefined) {
  const result = runSeed(single)
  cleanup()
  if (result.failure !== undefined) {
    printFailure(result)
    process.exit(1)
  }
  process.stdout.write(
    `sim: seed=${single} steps=${result.steps} crashes=${result.crashes} faults=${result.faults} sim_time=${Math.round(result.simMs / 1000)}s digest=${result.digest}\n`
  )
} else {
  const count = option("seeds") ?? 100
  const from = option("from") ?? 1
  const started = performance.now()
  let steps = 0
  let crashes = 0
  let faults = 0
  let failures = 0
  let ran = 0
  let stable = true
  // One seed in fifty (at least one) runs twice: the same seed must give the same digest.
  const sampleEvery = Math.max(1, Math.min(50, count))
  for (let seed = from; seed < from + count; seed++) {
    const result = runSeed(seed)
    ran++
    steps += result.steps
    crashes += result.crashes
    faults += result.faults
    if (result.failure !== undefined) {
      failures++
      printFailure(result)
      break
    }
    if ((seed - from) % sampleEvery === 0) {
      const again = runSeed(seed)
      if (again.digest !== result.digest) {
        stable = false
        process.stdout.write(`sim: seed ${seed} gave digest ${result.digest}, then ${again.digest}\n`)
      }
    }
  }
  cleanup()
  const seconds = (performance.now() - started) / 1000
  process.stdout.write(
    `sim: seeds=${ran} steps=${steps} crashes=${crashes} faults=${faults} failures=${failures} digest_stable=${stable ? "yes" : "no"} (${seconds.toFixed(1)} s, ${(ran / seconds).toFixed(1)} seeds/s)\n`
  )
  if (failures > 0 || !stable) process.exit(1)
}
