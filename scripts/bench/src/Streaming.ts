/**
 * Streaming ingestion: `streams` effects run at once, each a handler producing `tokensPerSecond`
 * deltas of 4 bytes ("tok ") for `seconds`, recorded through StreamIngest (flushed every 50 ms or
 * 4 KiB) over a file store with synchronous=FULL. Measured: deltas ingested per second, chunk commits
 * per second, write amplification (bytes the process wrote to storage, from /proc/self/io, over
 * bytes streamed) and the peak resident set size.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Boot, Engine, type Reactor, SqliteStore, StreamIngest } from "@orchestration/engine"
import { Effect, Layer, Stream } from "effect"
import { readFileSync } from "node:fs"
import { bump, effectKind } from "./BenchDomain.js"
import { benchConfig, runBench, storeFile } from "./EngineStack.js"
import { nowMs } from "./Stats.js"

export interface StreamingResult {
  readonly streams: number
  readonly deltasPerSecond: number
  readonly commitsPerSecond: number
  readonly writeAmplification: number
  readonly peakRssMb: number
  readonly seconds: number
}

const token = "tok "

/** Bytes this process caused to be written to storage so far (Linux). */
const writeBytes = (): number => {
  const line = readFileSync("/proc/self/io", "utf8")
    .split("\n")
    .find((l) => l.startsWith("write_bytes:"))
  return Number(line?.split(":")[1]?.trim() ?? 0)
}

export const runStreaming = (dir: string, streams: number, seconds: number, tokensPerSecond = 50) =>
  runBench(
    Effect.gen(function* () {
      const deltas = tokensPerSecond * seconds
      const reactor: Reactor.ReactorDefinition<Engine.Engine> = {
        name: "bench-stream",
        kinds: { [effectKind]: { onProcessLoss: "replay-safe" as const, timeout: "10 minutes" as const } },
        concurrency: streams,
        handle: (row) =>
          StreamIngest.run(
            { effect: row },
            Stream.repeatEffect(Effect.as(Effect.sleep(1_000 / tokensPerSecond), token)).pipe(Stream.take(deltas))
          ).pipe(Effect.mapError(StreamIngest.toEffectFailure), Effect.as({ ok: true }))
      }
      const context = yield* Layer.build(
        Boot.layer({ reactors: [reactor], activation: "on-boot", retention: false }).pipe(
          Layer.provideMerge(Engine.layer({ ...benchConfig, activation: "manual" })),
          Layer.provideMerge(SqliteStore.layer({ filename: storeFile(dir), synchronous: "FULL" }))
        )
      )
      const engine = Engine.Engine.pipe(Effect.provide(context))
      const sql = yield* SqlClient.pipe(Effect.provide(context))
      const bytesBefore = writeBytes()
      let peakRss = process.memoryUsage().rss
      const start = nowMs()
      for (let i = 0; i < streams; i++) {
        yield* Effect.flatMap(engine, (e) => e.dispatchWithReceipt(bump("stream", i, i)))
      }
      while (true) {
        yield* Effect.sleep("100 millis")
        peakRss = Math.max(peakRss, process.memoryUsage().rss)
        const [row] = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM outbox WHERE status = 'succeeded'`
        if (Number(row?.n ?? 0) >= streams) break
        const [failed] = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM outbox WHERE status = 'failed'`
        if (Number(failed?.n ?? 0) > 0) return yield* Effect.dieMessage("a stream failed to be recorded")
      }
      const elapsed = (nowMs() - start) / 1_000
      const written = writeBytes() - bytesBefore
      const [chunks] = yield* sql<{
        n: number
        bytes: number
      }>`SELECT COUNT(*) AS n, SUM(LENGTH(text)) AS bytes FROM effect_stream_chunks`
      const streamedBytes = streams * deltas * token.length
      if (Number(chunks?.bytes ?? 0) !== streamedBytes) {
        return yield* Effect.dieMessage(`recorded ${chunks?.bytes} bytes of ${streamedBytes} streamed`)
      }
      return {
        streams,
        seconds: elapsed,
        deltasPerSecond: (streams * deltas) / elapsed,
        commitsPerSecond: Number(chunks?.n ?? 0) / elapsed,
        writeAmplification: written / streamedBytes,
        peakRssMb: peakRss / (1024 * 1024)
      } satisfies StreamingResult
    })
  )
