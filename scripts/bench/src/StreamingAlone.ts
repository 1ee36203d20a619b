/**
 * `node dist/src/StreamingAlone.js [streams,…] [seconds] [rounds] [together]`: the streaming line of `pnpm bench`
 * alone (default 1,16,64 streams, 5 s of tokens, 1 round), for profiling (`node --cpu-prof`) and for
 * before/after rounds. Prints one JSON line per run on stdout, with the load average at its start.
 */
import { loadavg } from "node:os"
import { runStreaming } from "./Streaming.js"
import { withTempDir } from "./TempDir.js"

const counts = (process.argv[2] ?? "1,16,64").split(",").map(Number)
const seconds = Number(process.argv[3] ?? 5)
const rounds = Number(process.argv[4] ?? 1)
/** `together`: every stream's client dispatches at once (Streaming.runStreaming's `starts`). */
const starts = process.argv[5] === "together" ? "together" : "one-by-one"

for (let round = 1; round <= rounds; round++) {
  for (const streams of counts) {
    const load = loadavg()[0]!
    // The run's span on the monotonic clock a --cpu-prof profile's timestamps use (µs).
    const from = Number(process.hrtime.bigint() / 1000n)
    const r = await withTempDir("streaming", (dir) => runStreaming(dir, streams, seconds, 50, starts))
    const to = Number(process.hrtime.bigint() / 1000n)
    const cpuMsPerDelta = (r.cpuMsPerSecond * r.seconds) / (streams * seconds * 50)
    console.log(JSON.stringify({ round, load: Number(load.toFixed(1)), ...r, cpuMsPerDelta, from, to }))
  }
}
