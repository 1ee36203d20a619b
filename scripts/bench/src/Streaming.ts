/**
 * Streaming ingestion, end to end: `streams` effects run at once, each a handler producing
 * `tokensPerSecond` deltas of 4 bytes ("tok ") for `seconds` on a fixed schedule (token i is due at
 * start + i / rate, however late the process is: a provider does not wait for us), recorded through
 * StreamIngest (default 50 ms / 4 KiB flushes) over a file store with synchronous=FULL. One reader
 * per stream follows its aggregate with `ThreadStream.follow`, the function `GET
 * /v1/threads/:id/stream` serves, and formats each message as the SSE text it would send; the HTTP
 * socket itself is not in the path (see docs/benchmarks.md).
 *
 * Measured: delta latency (a token's due time at the provider → its SSE message formatted for the
 * reader) p50/p99 over every token of every stream, deltas delivered per second, transactions and
 * chunk commits per second, write amplification (bytes the process wrote to storage, from
 * /proc/self/io, over bytes streamed) and the peak resident set size.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import {
  Boot,
  CommandId,
  Engine,
  type EventRecord,
  type FlushWindows,
  type Outbox,
  type Reactor,
  SqliteStore,
  StreamIngest
} from "@orchestration/engine"
import { ThreadStream } from "@orchestration/server"
import { Duration, Effect, Fiber, identity, Layer, RuntimeFlags, RuntimeFlagsPatch, Stream } from "effect"
import { readFileSync } from "node:fs"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { bump, effectKind } from "./BenchDomain.js"
import { benchConfig, runBench, storeFile } from "./EngineStack.js"
import { nowMs, percentile } from "./Stats.js"

export interface StreamingResult {
  readonly streams: number
  readonly deltasPerSecond: number
  /** Engine transactions per second during the run (each a group commit of queued commands). */
  readonly transactionsPerSecond: number
  readonly commitsPerSecond: number
  readonly writeAmplification: number
  readonly peakRssMb: number
  readonly seconds: number
  /** Provider due time → SSE message at the reader, over every token. */
  readonly latencyP50Ms: number
  readonly latencyP99Ms: number
  readonly latencyMaxMs: number
  /**
   * The same latency less the wait for the token's flush window to end (on the engine's clock, the
   * 50 ms windows FlushWindows uses): what the commit, the wake-up and the reader add, p50/p99.
   */
  readonly afterWindowP50Ms: number
  readonly afterWindowP99Ms: number
  /** CPU time the process used per second of the run (1,000 = one core busy): load-independent. */
  readonly cpuMsPerSecond: number
  /** How late the event loop ran timers during the run (perf_hooks): p99, ms. */
  readonly loopDelayP99Ms: number
  /**
   * The latency p99 by where the token sits in its stream: its first 0.5 s (while the other streams
   * start), its last 0.5 s (while they end) and the middle, to tell start-up and end bursts from the
   * steady state.
   */
  readonly phaseP99Ms: { readonly start: number; readonly middle: number; readonly end: number }
  /** Each client's own p99 (over its stream's tokens): the worst of them, and their median. */
  readonly clientP99Ms: { readonly worst: number; readonly median: number }
}

const token = "tok "
/** One turn of Node's event loop (its timers and I/O run), as between two network requests. */
const ioTurn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
/** StreamIngest's default flush window. */
const windowMs = Duration.toMillis(StreamIngest.defaults.flushEvery)

/** Bytes this process caused to be written to storage so far (Linux). */
const writeBytes = (): number => {
  const line = readFileSync("/proc/self/io", "utf8")
    .split("\n")
    .find((l) => l.startsWith("write_bytes:"))
  return Number(line?.split(":")[1]?.trim() ?? 0)
}

/** One stream's clock: when its provider started, so token i is due at `start + i × period`. */
interface StreamClock {
  start: number
}

/** The bench domain as a "thread": a bump makes its effect's stream live; the effect's outcome closes it. */
export const rulesFor = (run: string): ThreadStream.ThreadStreamRules => ({
  aggregateType: "counter",
  transition: (_live, event: EventRecord) =>
    event.type === "counter.bumped"
      ? { next: { turnId: event.aggregateId, step: 1 } }
      : event.type === "counter.effect-done"
        ? { close: { status: "completed" }, next: null }
        : undefined,
  stepEffectId: (step) => effectIdOf(run, Number(step.turnId.slice(2)))
})

const effectIdOf = (run: string, i: number) => CommandId.boundedId("", `${bump(run, i, i).commandId}:0`)

/**
 * The engine under the streaming measurements: one reactor whose handler records each bumped
 * counter's effect through StreamIngest (`produce` writes to it), over a synchronous=FULL file store.
 */
export const streamingEngine = (
  dir: string,
  streams: number,
  produce: (
    ingest: StreamIngest.StreamIngest,
    row: Outbox.OutboxRow
  ) => Effect.Effect<void, StreamIngest.StreamNotRecorded>,
  /**
   * Run each handler with op supervision on (ChunkCost counts Effect steps): the reactor forks its
   * handlers with the default runtime flags (FiberMap.run), so a supervisor enabled around the
   * engine never sees them, their stream's flusher included.
   */
  superviseHandlers = false
) =>
  Effect.gen(function* () {
    const reactor: Reactor.ReactorDefinition<Engine.Engine | FlushWindows> = {
      name: "bench-stream",
      kinds: { [effectKind]: { onProcessLoss: "replay-safe" as const, timeout: "10 minutes" as const } },
      concurrency: streams,
      handle: (row) =>
        Effect.scoped(Effect.flatMap(StreamIngest.make({ effect: row }), (ingest) => produce(ingest, row))).pipe(
          Effect.mapError(StreamIngest.toEffectFailure),
          Effect.as({ ok: true }),
          superviseHandlers
            ? Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision))
            : identity
        )
    }
    const context = yield* Layer.build(
      Boot.layer({ reactors: [reactor], activation: "on-boot", retention: false }).pipe(
        Layer.provideMerge(Engine.layer({ ...benchConfig, activation: "manual" })),
        Layer.provideMerge(SqliteStore.layer({ filename: storeFile(dir), synchronous: "FULL" }))
      )
    )
    return {
      engine: yield* Engine.Engine.pipe(Effect.provide(context)),
      sql: yield* SqlClient.pipe(Effect.provide(context))
    }
  })

export const runStreaming = (
  dir: string,
  streams: number,
  seconds: number,
  tokensPerSecond = 50,
  /**
   * How the clients start their streams: one after the other, each dispatch waiting for its commit
   * and then an event-loop turn (the bench's default), or all at once, as 64 clients sending at the
   * same moment (a diagnostic: `StreamingAlone … together`).
   */
  starts: "one-by-one" | "together" = "one-by-one"
) =>
  runBench(
    Effect.gen(function* () {
      const deltas = tokensPerSecond * seconds
      const period = 1_000 / tokensPerSecond
      const run = "stream"
      const clocks = new Map<string, StreamClock>()
      const { engine, sql } = yield* streamingEngine(dir, streams, (ingest, row) =>
        Effect.gen(function* () {
          const clock = { start: nowMs() }
          clocks.set(row.aggregateId, clock)
          // The provider: token i arrives at its due time (a loop, not a Stream: a Stream's
          // per-element machinery cost more CPU than the engine's share, see docs/benchmarks.md).
          const produce = Effect.gen(function* () {
            for (let i = 1; i <= deltas; i++) {
              const wait = clock.start + i * period - nowMs()
              if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
              yield* ingest.write(token)
            }
          })
          yield* Effect.raceFirst(produce, ingest.failed)
          yield* ingest.flush
        })
      )
      const rules = rulesFor(run)
      const latencies: Array<number> = []
      /** The same latencies, by the token's place in its stream (phaseP99Ms). */
      const phases = { start: [] as Array<number>, middle: [] as Array<number>, end: [] as Array<number> }
      const edge = tokensPerSecond / 2
      const afterWindow: Array<number> = []
      /** Each client's latencies (clientP99Ms). */
      const perClient: Array<Array<number>> = []
      // From this process's monotonic clock to the wall clock the engine's windows are cut on.
      const toWall = Date.now() - nowMs()

      // The readers connect first, as clients that sent a message and opened its stream.
      const readers = yield* Effect.forEach(
        Array.from({ length: streams }, (_, i) => i),
        (i) => {
          const threadId = `c-${i}`
          let delivered = 0
          const own: Array<number> = []
          perClient.push(own)
          return ThreadStream.follow({ engine, sql, rules, threadId, from: ThreadStream.start }).pipe(
            Stream.map((message) => ({ message, sse: ThreadStream.formatMessage(message) })),
            Stream.tap(({ message, sse }) =>
              Effect.sync(() => {
                if (message.kind !== "delta" || sse.length === 0) return
                const at = nowMs()
                const clock = clocks.get(threadId)!
                const end = message.data.offset + message.data.text.length
                // Every whole token this delta completes: its latency since it was due.
                for (let t = delivered; t < Math.floor(end / token.length); t++) {
                  const due = clock.start + (t + 1) * period
                  latencies.push(at - due)
                  own.push(at - due)
                  phases[t < edge ? "start" : t >= deltas - edge ? "end" : "middle"].push(at - due)
                  afterWindow.push(at + toWall - (Math.floor((due + toWall) / windowMs) + 1) * windowMs)
                }
                delivered = Math.floor(end / token.length)
              })
            ),
            Stream.takeUntil(() => delivered >= deltas),
            Stream.runDrain,
            Effect.fork
          )
        }
      )
      const bytesBefore = writeBytes()
      const before = yield* engine.stats
      let peakRss = process.memoryUsage().rss
      const cpuBefore = process.cpuUsage()
      const loop = monitorEventLoopDelay({ resolution: 5 })
      loop.enable()
      const start = nowMs()
      if (starts === "together") {
        yield* Effect.forEach(
          Array.from({ length: streams }, (_, i) => i),
          (i) => engine.dispatchWithReceipt(bump(run, i, i)),
          { concurrency: "unbounded", discard: true }
        )
      } else {
        for (let i = 0; i < streams; i++) {
          yield* engine.dispatchWithReceipt(bump(run, i, i))
          // The next client's send comes through the event loop, as an HTTP request does. Without
          // this turn the 64 sends, each answered in a microtask after its synchronous commit, ran
          // back to back for ≈ 335 ms with no turn for timers: no provider token and no flush window
          // could fire until the last stream had started (docs/benchmarks.md, 2026-12-03).
          yield* ioTurn
        }
      }
      const sampler = yield* Effect.fork(
        Effect.forever(
          Effect.zipRight(
            Effect.sleep("100 millis"),
            Effect.sync(() => {
              peakRss = Math.max(peakRss, process.memoryUsage().rss)
            })
          )
        )
      )
      yield* Fiber.joinAll(readers)
      const elapsed = (nowMs() - start) / 1_000
      const cpu = process.cpuUsage(cpuBefore)
      loop.disable()
      yield* Fiber.interrupt(sampler)
      const after = yield* engine.stats
      const written = writeBytes() - bytesBefore
      const [chunks] = yield* sql<{
        n: number
        bytes: number
      }>`SELECT COUNT(*) AS n, SUM(LENGTH(text)) AS bytes FROM effect_stream_chunks`
      const streamedBytes = streams * deltas * token.length
      if (Number(chunks?.bytes ?? 0) !== streamedBytes) {
        return yield* Effect.dieMessage(`recorded ${chunks?.bytes} bytes of ${streamedBytes} streamed`)
      }
      if (latencies.length !== streams * deltas) {
        return yield* Effect.dieMessage(`readers saw ${latencies.length} tokens of ${streams * deltas}`)
      }
      return {
        streams,
        seconds: elapsed,
        deltasPerSecond: (streams * deltas) / elapsed,
        transactionsPerSecond: (after.transactions - before.transactions) / elapsed,
        commitsPerSecond: Number(chunks?.n ?? 0) / elapsed,
        writeAmplification: written / streamedBytes,
        peakRssMb: peakRss / (1024 * 1024),
        latencyP50Ms: percentile(latencies, 50),
        latencyP99Ms: percentile(latencies, 99),
        latencyMaxMs: latencies.reduce((a, b) => Math.max(a, b), 0),
        afterWindowP50Ms: percentile(afterWindow, 50),
        afterWindowP99Ms: percentile(afterWindow, 99),
        cpuMsPerSecond: (cpu.user + cpu.system) / 1_000 / elapsed,
        loopDelayP99Ms: loop.percentile(99) / 1e6,
        phaseP99Ms: {
          start: percentile(phases.start, 99),
          middle: percentile(phases.middle, 99),
          end: percentile(phases.end, 99)
        },
        clientP99Ms: {
          worst: perClient.reduce((worst, own) => Math.max(worst, percentile(own, 99)), 0),
          median: percentile(
            perClient.map((own) => percentile(own, 99)),
            50
          )
        }
      } satisfies StreamingResult
    })
  )
