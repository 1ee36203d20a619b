/**
 * Paired A/B of two builds of the simulator in one process: each seed is run by both, in alternating
 * order, and the CPU of each run is taken with process.cpuUsage. On a shared machine whose speed drifts
 * by ±20% between separate runs, this puts two builds within ±2% of each other (the same build against
 * itself: 0.989–1.016), enough to see a 5% change.
 *
 *   node scripts/sim/tools/pair-ab.mjs <root A> <root B> [from=0] [count=60]
 *
 * A root is a checkout with its packages and scripts/sim built; for a base build, copy `packages`,
 * `scripts` and `package.json` of a built checkout to a scratch directory and symlink its
 * `node_modules` to this one's (the two module graphs stay apart: each root's own @orchestration
 * packages; `effect` and better-sqlite3 are shared, which the simulator allows).
 */
const [rootA, rootB] = process.argv.slice(2, 4)
if (rootA === undefined || rootB === undefined) {
  process.stderr.write("usage: node scripts/sim/tools/pair-ab.mjs <root A> <root B> [from] [count]\n")
  process.exit(2)
}
const A = await import(`${rootA}/scripts/sim/dist/src/Simulation.js`)
const B = await import(`${rootB}/scripts/sim/dist/src/Simulation.js`)
const from = Number(process.argv[4] ?? 0)
const count = Number(process.argv[5] ?? 60)
const cpu = () => {
  const used = process.cpuUsage()
  return (used.user + used.system) / 1000
}

// A warm-up seed each: the first seed of a process pays for compiling the hot paths.
A.runSeed(from)
B.runSeed(from)
const total = { a: 0, b: 0 }
const steps = { a: 0, b: 0 }
const ratios = []
for (let seed = from; seed < from + count; seed++) {
  const order = seed % 2 === 0 ? ["a", "b"] : ["b", "a"]
  const ms = {}
  for (const side of order) {
    const started = cpu()
    const result = (side === "a" ? A : B).runSeed(seed)
    ms[side] = cpu() - started
    steps[side] += result.steps
    if (result.failure !== undefined)
      process.stdout.write(`${side}: seed ${seed} failed: ${result.failure.invariant}\n`)
  }
  total.a += ms.a
  total.b += ms.b
  ratios.push(ms.b / ms.a)
}
A.cleanup()
B.cleanup()
ratios.sort((x, y) => x - y)
const at = (q) => ratios[Math.floor(q * (ratios.length - 1))].toFixed(3)
for (const [side, root] of [
  ["a", rootA],
  ["b", rootB]
])
  process.stdout.write(
    `${side.toUpperCase()} ${root}: ${(total[side] / count).toFixed(1)} ms CPU a seed (${((count * 1000) / total[side]).toFixed(2)} seeds per CPU second), steps=${steps[side]}\n`
  )
process.stdout.write(
  `B/A: total ${(total.b / total.a).toFixed(3)}, per seed median ${at(0.5)} (quartiles ${at(0.25)}, ${at(0.75)})\n`
)
