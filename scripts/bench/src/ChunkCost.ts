/**
 * `node dist/src/ChunkCost.js [streams] [chunks] [readers]`: the engine's cost per stream chunk alone: `streams`
 * handlers each write and flush `chunks` chunks one at a time (no provider timing, no windows to wait for),
 * optionally with one ThreadStream reader per stream (as Streaming.ts's). Prints CPU µs per chunk (inflated by
 * the op supervision that counts Effect steps and fibers: compare runs of this tool only), steps and fibers per
 * chunk (deterministic: a change that removes work shows exactly; the handlers' fibers, their flushers included, are
 * counted since 2026-12-02), and the run's span for a `--cpu-prof` profile.
 */
import { ThreadStream } from "@orchestration/server"
import { Effect, Fiber, RuntimeFlags, RuntimeFlagsPatch, Stream, Supervisor } from "effect"
import { bump } from "./BenchDomain.js"
import { runBench } from "./EngineStack.js"
import { rulesFor, streamingEngine } from "./Streaming.js"
import { withTempDir } from "./TempDir.js"

const streams = Number(process.argv[2] ?? 64)
const chunks = Number(process.argv[3] ?? 100)
const withReaders = process.argv[4] === "readers"
const run = "cost"

let fibers = 0
let steps = 0
class Counting extends Supervisor.AbstractSupervisor<void> {
  value = Effect.void
  override onStart() {
    fibers++
  }
  override onEffect() {
    steps++
  }
}
const main = (dir: string) =>
  runBench(
    Effect.supervised(new Counting())(
      Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision))(
        Effect.gen(function* () {
          const { engine, sql } = yield* streamingEngine(
            dir,
            streams,
            (ingest) =>
              Effect.gen(function* () {
                for (let i = 0; i < chunks; i++) {
                  yield* ingest.write("tok ")
                  yield* ingest.flush
                }
              }),
            true
          )
          const rules = rulesFor(run)
          const readers = withReaders
            ? yield* Effect.forEach(
                Array.from({ length: streams }, (_, i) => i),
                (i) => {
                  let delivered = 0
                  return ThreadStream.follow({ engine, sql, rules, threadId: `c-${i}`, from: ThreadStream.start }).pipe(
                    Stream.map((m) => ({ m, sse: ThreadStream.formatMessage(m) })),
                    Stream.tap(({ m }) =>
                      Effect.sync(() => {
                        if (m.kind === "delta") delivered = m.data.offset + m.data.text.length
                      })
                    ),
                    Stream.takeUntil(() => delivered >= chunks * 4),
                    Stream.runDrain,
                    Effect.fork
                  )
                }
              )
            : []
          const f0 = fibers
          const st0 = steps
          const s0 = yield* engine.stats
          const from = Number(process.hrtime.bigint() / 1000n)
          const cpu0 = process.cpuUsage()
          const t0 = performance.now()
          for (let i = 0; i < streams; i++) yield* engine.dispatchWithReceipt(bump(run, i, i))
          if (withReaders) yield* Fiber.joinAll(readers)
          else {
            while (true) {
              const [row] = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM outbox WHERE status = 'succeeded'`
              if (Number(row?.n) >= streams) break
              yield* Effect.sleep("20 millis")
            }
          }
          const cpu = process.cpuUsage(cpu0)
          const s1 = yield* engine.stats
          const wall = performance.now() - t0
          const n = streams * chunks
          console.log(
            JSON.stringify({
              streams,
              chunks,
              withReaders,
              wallMs: Math.round(wall),
              cpuUsPerChunk: Math.round((cpu.user + cpu.system) / n),
              chunksPerSec: Math.round(n / (wall / 1000)),
              fibersPerChunk: (fibers - f0) / n,
              stepsPerChunk: Math.round((steps - st0) / n),
              tx: s1.transactions - s0.transactions,
              user: cpu.user,
              sys: cpu.system,
              from,
              to: Number(process.hrtime.bigint() / 1000n)
            })
          )
        })
      )
    )
  )

await withTempDir("chunkcost", main)
