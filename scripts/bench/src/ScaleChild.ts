/** Child process of Scale.ts: dispatch at 16 clients over an existing store, then report JSON with the RSS. */
import { runDispatch } from "./Dispatch.js"
import { percentile, perSecond } from "./Stats.js"

const [dir, ops, label = "run"] = process.argv.slice(2)
if (dir === undefined || ops === undefined) throw new Error("usage: ScaleChild <dir> <ops> [label]")
const run = await runDispatch(dir, 16, Number(ops), 64, "default", label)
process.stdout.write(
  `${JSON.stringify({
    perSecond: perSecond(run),
    p50Ms: percentile(run.latenciesMs, 50),
    p99Ms: percentile(run.latenciesMs, 99),
    rssMb: process.memoryUsage().rss / 2 ** 20
  })}\n`
)
