/**
 * Durable stream ingestion: a running effect's text is recorded in chunks through the front door,
 * a batch leaves the buffer only after its commit, a refused flush is re-sent under its id until the
 * store takes it (or the effect fails with reason `storage`), a stale attempt's chunk writes
 * nothing, and a full buffer slows the producer. Real store files (SQLite; a schema per file in the
 * PostgreSQL conformance run), TestClock for every wait.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  Cause,
  Chunk,
  Deferred,
  Effect,
  Exit,
  Fiber,
  Layer,
  Option,
  Queue,
  Runtime,
  Schema,
  Stream,
  TestClock
} from "effect"
import {
  Aggregate,
  CommandId,
  Decision,
  EffectFailure,
  Engine,
  Retention,
  StreamChunks,
  StreamIngest
} from "../src/index.js"
import * as FlushWindows from "../src/FlushWindows.js"
import * as Outbox from "../src/Outbox.js"
import { StorageFaults } from "../src/storage/StorageFaults.js"
import type { OutboxRow } from "../src/Outbox.js"
import { tempDbFile } from "./fixtures/harness.js"
import { Job, submit } from "./fixtures/Jobs.js"
import {
  eventually,
  flushFaults,
  streamServices,
  gated,
  scriptedHandler,
  settle,
  stack,
  streaming,
  testReactor
} from "./fixtures/reactors.js"

const END = "\u0000end"

/** Two texts of one length whose 32-bit FNV-1a (over UTF-16 code units) is the same, d080ece7. */
const FNV1A32_COLLISION = ["kvsdatov", "arohqhqj"] as const

const fnv1a32 = (text: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193)
  return hash >>> 0
}

/** A producer the test feeds piece by piece; END finishes it. */
const feed = () => {
  const queue = Effect.runSync(Queue.unbounded<string>())
  const producer = Stream.fromQueue(queue).pipe(Stream.takeWhile((piece) => piece !== END))
  return { queue, producer, send: (piece: string) => Queue.offer(queue, piece) }
}

const chunksOf = (effectId: string) =>
  Effect.flatMap(Engine.Engine, (engine) => engine.readStreamChunks(effectId, { limit: 10_000 }))

const chunkCount = (effectId: string, n: number) => Effect.map(chunksOf(effectId), (chunks) => chunks.length === n)

const rowIs = (effectId: string, predicate: (row: OutboxRow) => boolean) =>
  Effect.map(Outbox.find(effectId), (row) => row !== undefined && predicate(row))

/** Submits job `s`; answers the engine once its row is running. */
const submitRunning = Effect.gen(function* () {
  const engine = yield* Engine.Engine
  yield* engine.dispatchWithReceipt(submit("s", "work.safe"))
  yield* eventually(
    rowIs("job:s", (r) => r.status === "running"),
    "running"
  )
  return engine
})

/** Job `s` streaming `producer` through `handler`, submitted and running. */
const runningStream = (handler: ReturnType<typeof scriptedHandler>, producer: Stream.Stream<string>) =>
  Effect.gen(function* () {
    handler.behaviors.set("job:s", yield* streaming(producer))
    return yield* submitRunning
  })

/** Job `s` whose handler waits at a gate; `start` submits it and returns once its row is running. */
const gatedRunningJob = () => {
  const handler = scriptedHandler()
  const running = gated()
  handler.behaviors.set("job:s", running.behavior)
  return { handler, running, start: submitRunning }
}

describe("durable stream ingestion", () => {
  it.effect("a flush happens 50 ms after the first write, not before, with a deterministic id", () => {
    const handler = scriptedHandler()
    const input = feed()
    return Effect.gen(function* () {
      const engine = yield* runningStream(handler, input.producer)
      yield* input.send("hello ")
      yield* input.send("world")
      yield* settle
      yield* TestClock.adjust("49 millis")
      yield* settle
      assert.deepStrictEqual(yield* chunksOf("job:s"), [])
      yield* TestClock.adjust("1 millis")
      yield* eventually(chunkCount("job:s", 1), "one chunk")
      const [chunk] = yield* chunksOf("job:s")
      assert.deepStrictEqual(
        [chunk!.attempt, chunk!.start, chunk!.end, chunk!.text, chunk!.commandId],
        [1, 0, 11, "hello world", "ingest:stream:job:s#1:0-11"]
      )
      assert.strictEqual(StreamChunks.chunkCommandId("job:s", 1, 0, 11), chunk!.commandId)
      const receipt = yield* engine.receipt(chunk!.commandId)
      assert.strictEqual(receipt._tag === "Some" && receipt.value.status, "accepted")
      yield* input.send(END)
      yield* eventually(
        rowIs("job:s", (r) => r.status === "succeeded"),
        "succeeded"
      )
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })

  const bothAre = (status: OutboxRow["status"]) =>
    Effect.zipWith(
      rowIs("job:a", (r) => r.status === status),
      rowIs("job:b", (r) => r.status === status),
      (a, b) => a && b
    )

  /**
   * Jobs `a` and `b`, each streaming its own feed (`options` for a's ingest), submitted and running;
   * answers the engine and the feeds.
   */
  const twoStreams = (handler: ReturnType<typeof scriptedHandler>, optionsOfA: { readonly flushBytes?: number } = {}) =>
    Effect.gen(function* () {
      const first = feed()
      const second = feed()
      handler.behaviors.set("job:a", yield* streaming(first.producer, optionsOfA))
      handler.behaviors.set("job:b", yield* streaming(second.producer))
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("a", "work.safe"))
      yield* engine.dispatchWithReceipt(submit("b", "work.safe"))
      yield* eventually(bothAre("running"), "both running")
      return { engine, first, second }
    })

  /** From TestClock 0: a writes "from a" 10 ms into the window [0, 50), b writes "from b" 30 ms into it. */
  const writeAt10And30 = (first: ReturnType<typeof feed>, second: ReturnType<typeof feed>) =>
    Effect.gen(function* () {
      yield* TestClock.adjust("10 millis")
      yield* first.send("from a")
      yield* settle
      yield* TestClock.adjust("20 millis")
      yield* second.send("from b")
    })

  it.effect("streams whose text waits in one flush window flush together, in one transaction", () => {
    const handler = scriptedHandler()
    return Effect.gen(function* () {
      const { engine, first, second } = yield* twoStreams(handler)
      // Their first writes come 10 and 30 ms into the window [0, 50): both are due at 50, not at 60 and 80.
      yield* writeAt10And30(first, second)
      yield* settle
      const before = (yield* engine.stats).transactions
      yield* TestClock.adjust("19 millis")
      yield* settle
      assert.deepStrictEqual([...(yield* chunksOf("job:a")), ...(yield* chunksOf("job:b"))], [])
      yield* TestClock.adjust("1 millis")
      yield* eventually(
        Effect.zipWith(chunkCount("job:a", 1), chunkCount("job:b", 1), (a, b) => a && b),
        "both flushed"
      )
      const transactions = (yield* engine.stats).transactions - before
      yield* first.send(END)
      yield* second.send(END)
      assert.strictEqual(transactions, 1, "one group commit for both flushes")
      yield* eventually(bothAre("succeeded"), "both succeeded")
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })

  it.effect("a stream that ends while another's text waits in the window ends in that window's commit", () => {
    const handler = scriptedHandler()
    return Effect.gen(function* () {
      const { engine, first, second } = yield* twoStreams(handler)
      // b writes and ends 30 ms into the window [0, 50): its end waits for a's text, not sent alone.
      yield* writeAt10And30(first, second)
      yield* second.send(END)
      yield* settle
      assert.deepStrictEqual(yield* chunksOf("job:b"), [], "the end waits for the window")
      assert.isTrue(yield* rowIs("job:b", (r) => r.status === "running"))
      const before = (yield* engine.stats).transactions
      yield* TestClock.adjust("20 millis")
      yield* eventually(
        rowIs("job:b", (r) => r.status === "succeeded"),
        "b succeeded"
      )
      assert.deepStrictEqual(
        [...(yield* chunksOf("job:a")), ...(yield* chunksOf("job:b"))].map((c) => c.text),
        ["from a", "from b"]
      )
      // One commit for both chunks, one for b's settlement.
      assert.strictEqual((yield* engine.stats).transactions - before, 2)
      // a, alone now with nothing buffered, ends at once: the clock does not move again.
      yield* first.send(END)
      yield* eventually(bothAre("succeeded"), "both succeeded")
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })

  it.effect("streams that all end in one window end at once, together, without the clock moving", () => {
    const handler = scriptedHandler()
    return Effect.gen(function* () {
      const { first, second } = yield* twoStreams(handler)
      yield* first.send("from a")
      yield* second.send("from b")
      yield* settle
      yield* first.send(END)
      yield* settle
      assert.deepStrictEqual(yield* chunksOf("job:a"), [], "a waits for b, which waits in the window")
      // b ends too: only ending streams are left in the window, which opens without its timer.
      yield* second.send(END)
      yield* eventually(bothAre("succeeded"), "both succeeded")
      assert.deepStrictEqual(
        [...(yield* chunksOf("job:a")), ...(yield* chunksOf("job:b"))].map((c) => c.text),
        ["from a", "from b"]
      )
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })

  // Live clock: the case is Node's timer phase, which TestClock does not have. Streams whose last
  // tokens are overdue end one timer callback after another, and the microtasks of each callback
  // (the ingest's fibers, the processor, a synchronous SQLite commit) run before the next callback.
  it.live("streams ending in consecutive timer callbacks of one turn end in one commit, not one each", () => {
    const handler = scriptedHandler()
    const a = gated()
    const b = gated()
    return Effect.gen(function* () {
      handler.behaviors.set("job:a", a.behavior)
      handler.behaviors.set("job:b", b.behavior)
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("a", "work.safe"))
      yield* engine.dispatchWithReceipt(submit("b", "work.safe"))
      yield* eventually(bothAre("running"), "both running")
      const rowA = (yield* Outbox.find("job:a"))!
      const rowB = (yield* Outbox.find("job:b"))!
      const transactions = yield* Effect.scoped(
        Effect.gen(function* () {
          const ingestA = yield* StreamIngest.make({ effect: rowA })
          const ingestB = yield* StreamIngest.make({ effect: rowB })
          const runtime = yield* Effect.runtime<never>()
          const before = (yield* engine.stats).transactions
          // Each stream's last write and end, from its own timer callback (same delay: one timer phase).
          yield* Effect.async<void>((resume) => {
            let ended = 0
            const end = (ingest: StreamIngest.StreamIngest, text: string) => () =>
              Runtime.runFork(runtime)(Effect.zipRight(ingest.write(text), ingest.flush)).addObserver(() => {
                if (++ended === 2) resume(Effect.void)
              })
            // Early in a flush window, so the two ends cannot fall on both sides of its boundary.
            const delay = 55 - (Date.now() % 50)
            setTimeout(end(ingestA, "last of a"), delay)
            setTimeout(end(ingestB, "last of b"), delay)
          })
          return (yield* engine.stats).transactions - before
        })
      ).pipe(Effect.provide(yield* streamServices))
      assert.deepStrictEqual(
        [...(yield* chunksOf("job:a")), ...(yield* chunksOf("job:b"))].map((c) => c.text),
        ["last of a", "last of b"]
      )
      assert.strictEqual(transactions, 1, "both ends in one commit")
      yield* a.open
      yield* b.open
      yield* eventually(bothAre("succeeded"), "both succeeded")
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })

  it.effect("an end waits only while another stream waits in the window: one flushed by its size leaves it", () => {
    const handler = scriptedHandler()
    return Effect.gen(function* () {
      const { first, second } = yield* twoStreams(handler, { flushBytes: 8 })
      yield* first.send("a")
      yield* second.send("from b")
      yield* second.send(END)
      yield* settle
      assert.deepStrictEqual(yield* chunksOf("job:b"), [], "b's end waits for a, which waits in the window")
      // a reaches its flush size: it flushes now and no longer waits in the window, so b goes.
      yield* first.send("bcdefghij")
      yield* eventually(
        rowIs("job:b", (r) => r.status === "succeeded"),
        "b succeeded without the clock moving"
      )
      assert.deepStrictEqual(
        (yield* chunksOf("job:a")).map((c) => c.text),
        ["abcdefghij"]
      )
      yield* first.send(END)
      yield* eventually(bothAre("succeeded"), "both succeeded")
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })

  it.effect("a flush returns after the readers its commit rang have run, not before them", () => {
    const handler = scriptedHandler()
    const hold = gated()
    return Effect.gen(function* () {
      handler.behaviors.set("job:s", hold.behavior)
      const engine = yield* submitRunning
      const row = (yield* Outbox.find("job:s"))!
      const seen = yield* Effect.scoped(
        Effect.gen(function* () {
          const follower = yield* engine.followAggregate("job", "s")
          let woken = false
          yield* Effect.fork(
            Effect.zipRight(
              follower.changed,
              Effect.sync(() => (woken = true))
            )
          )
          yield* settle
          const ingest = yield* StreamIngest.make({ effect: row })
          yield* ingest.write("the end")
          yield* ingest.flush
          // What the caller does next (its effect's settlement) comes after the reader's wake-up.
          return woken
        })
      ).pipe(Effect.provide(yield* streamServices))
      yield* hold.open
      assert.isTrue(seen, "the reader rung by the flush's commit ran before the flush returned")
      assert.deepStrictEqual(
        (yield* chunksOf("job:s")).map((c) => c.text),
        ["the end"]
      )
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })

  /**
   * The first stream chunk's commit is held open (on the TestClock) for `holdMillis` at its receipt
   * write, so a test can write while that flush is in flight.
   */
  const holdFirstFlush = (holdMillis: number) => {
    const held = { done: false }
    const layer = Layer.succeed(StorageFaults, {
      before: (point, commandId) =>
        Effect.suspend(() => {
          if (held.done || point !== "receipts" || !commandId.startsWith("ingest:stream:")) return Effect.void
          held.done = true
          return Effect.sleep(`${holdMillis} millis`)
        })
    })
    return { held, layer }
  }

  /** Job `s` streaming `input`, running; at TestClock 0, with its first flush held open `holdMillis`. */
  const streamWithHeldFlush = (input: ReturnType<typeof feed>, holdMillis: number) => {
    const handler = scriptedHandler()
    const hold = holdFirstFlush(holdMillis)
    const layer = stack([testReactor(handler.handle)], { filename: tempDbFile() }).pipe(Layer.provide(hold.layer))
    return { hold, layer, start: runningStream(handler, input.producer) }
  }

  it.effect(
    "text written while a flush is in flight is sent as soon as that flush lands, not at its window's end",
    () => {
      const input = feed()
      const { hold, layer, start } = streamWithHeldFlush(input, 5)
      return Effect.gen(function* () {
        yield* start
        yield* input.send("a")
        yield* settle
        // The window [0, 50) ends: "a" is sent, and its commit is held until 55.
        yield* TestClock.adjust("50 millis")
        yield* eventually(
          Effect.sync(() => hold.held.done),
          "first flush in flight"
        )
        // "b" may have been due before 50 (a provider's chunk read late while the process committed):
        // it goes right after "a", not at 100.
        yield* input.send("b")
        yield* settle
        yield* TestClock.adjust("5 millis")
        yield* eventually(chunkCount("job:s", 2), "b right after a")
        assert.deepStrictEqual(
          (yield* chunksOf("job:s")).map((c) => c.text),
          ["a", "b"]
        )
        yield* input.send(END)
        yield* eventually(
          rowIs("job:s", (r) => r.status === "succeeded"),
          "succeeded"
        )
      }).pipe(Effect.provide(layer))
    }
  )

  it.effect("a defect while sending is raised to the caller that flushes and to failed, not left waiting forever", () =>
    Effect.gen(function* () {
      const engine = { dispatchWithReceipt: () => Effect.dieMessage("a bug in the engine") }
      const exit = yield* Effect.scoped(
        Effect.gen(function* () {
          const ingest = yield* StreamIngest.make({
            effect: { effectId: "job:s", aggregateType: "job", aggregateId: "s", attempts: 1 }
          })
          yield* ingest.write("text")
          const flushing = yield* Effect.fork(Effect.exit(ingest.flush))
          const failed = yield* Effect.fork(Effect.exit(ingest.failed))
          yield* settle
          const failedEnded = yield* Fiber.poll(failed)
          assert.isTrue(
            Option.isSome(failedEnded) &&
              Exit.isSuccess(failedEnded.value) &&
              Exit.isFailure(failedEnded.value.value) &&
              Cause.isDie(failedEnded.value.value.cause),
            "failed ends with the defect"
          )
          return yield* Fiber.poll(flushing)
        })
      ).pipe(
        Effect.provide(FlushWindows.layer),
        Effect.provideService(Engine.Engine, engine as unknown as Engine.EngineShape)
      )
      assert.isTrue(Option.isSome(exit), "the flush has ended")
      const ended = Option.getOrThrow(exit)
      assert.isTrue(Exit.isSuccess(ended) && Exit.isFailure(ended.value) && Cause.isDie(ended.value.cause))
    })
  )

  it.effect(
    "a flush happens once flushBytes are buffered, without the clock moving; chunks concatenate to the text",
    () => {
      const handler = scriptedHandler()
      const input = feed()
      const pieces = ["ab", "cd", "ef", "gh", "é", "ü", "ij", "kl", "m"]
      return Effect.gen(function* () {
        handler.behaviors.set("job:s", yield* streaming(input.producer, { flushBytes: 8 }))
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(submit("s", "work.safe"))
        yield* eventually(
          rowIs("job:s", (r) => r.status === "running"),
          "running"
        )
        for (const piece of pieces.slice(0, 4)) yield* input.send(piece)
        yield* eventually(chunkCount("job:s", 1), "a size flush")
        assert.deepStrictEqual(
          (yield* chunksOf("job:s")).map((c) => [c.start, c.end, c.text]),
          [[0, 8, "abcdefgh"]]
        )
        for (const piece of pieces.slice(4)) yield* input.send(piece)
        yield* input.send(END)
        yield* eventually(
          rowIs("job:s", (r) => r.status === "succeeded"),
          "succeeded"
        )
        const chunks = yield* chunksOf("job:s")
        assert.strictEqual(chunks.map((c) => c.text).join(""), pieces.join(""))
        // Contiguous: each starts where the last ended.
        for (let i = 1; i < chunks.length; i++) assert.strictEqual(chunks[i]!.start, chunks[i - 1]!.end)
        for (const c of chunks) assert.strictEqual(c.commandId, StreamChunks.chunkCommandId("job:s", 1, c.start, c.end))
        const row = yield* Outbox.find("job:s")
        assert.deepStrictEqual(row!.response, {
          bufferedBytes: 0,
          committedEnd: pieces.join("").length,
          flushes: chunks.length
        })
      }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
    }
  )

  it.effect("a re-sent flush (same id) is a duplicate answered from its receipt: one copy in the table", () => {
    const { handler, running, start } = gatedRunningJob()
    return Effect.gen(function* () {
      const engine = yield* start
      const flush = {
        type: "effect.stream",
        commandId: StreamChunks.chunkCommandId("job:s", 1, 0, 5),
        effectId: "job:s",
        aggregateType: "job",
        aggregateId: "s",
        attempt: 1,
        start: 0,
        text: "hello"
      }
      const first = yield* engine.dispatchWithReceipt(flush, { origin: "internal" })
      const again = yield* engine.dispatchWithReceipt(flush, { origin: "internal" })
      assert.deepStrictEqual([first.duplicate, again.duplicate], [false, true])
      assert.deepStrictEqual(
        (yield* chunksOf("job:s")).map((c) => c.text),
        ["hello"]
      )
      // The same range under another id is out of order: the attempt already recorded it.
      const overlap = yield* Effect.flip(
        engine.dispatchWithReceipt({ ...flush, commandId: "ingest:stream:other" }, { origin: "internal" })
      )
      assert.deepStrictEqual(
        [overlap._tag, overlap._tag === "CommandRejected" && overlap.reason],
        ["CommandRejected", "stream-out-of-order"]
      )
      // Out of order is refused for now, not stored: a chunk sent ahead of the one it follows
      // (that one refused by the store, re-sent) is decided again when it comes again.
      assert.isTrue(Option.isNone(yield* engine.receipt("ingest:stream:other")))
      const ahead = { ...flush, commandId: StreamChunks.chunkCommandId("job:s", 1, 7, 9), start: 7, text: "!!" }
      assert.strictEqual(
        (yield* Effect.flip(engine.dispatchWithReceipt(ahead, { origin: "internal" })))._tag,
        "CommandRejected"
      )
      yield* engine.dispatchWithReceipt(
        { ...flush, commandId: StreamChunks.chunkCommandId("job:s", 1, 5, 7), start: 5, text: ", " },
        { origin: "internal" }
      )
      assert.isFalse((yield* engine.dispatchWithReceipt(ahead, { origin: "internal" })).duplicate)
      // Clients cannot send it.
      const fromClient = yield* Effect.flip(engine.dispatchWithReceipt({ ...flush, commandId: "c-1" }))
      assert.strictEqual(fromClient._tag, "InvalidCommand")
      assert.deepStrictEqual(
        (yield* chunksOf("job:s")).map((c) => c.text),
        ["hello", ", ", "!!"]
      )
      yield* running.open
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })

  it.effect("a re-send under a flush's id with another text of the same length is a conflict, not a duplicate", () => {
    const { handler, running, start } = gatedRunningJob()
    return Effect.gen(function* () {
      const engine = yield* start
      // Equal length, equal 32-bit FNV-1a: a fingerprint of that hash alone took them for one text.
      const [text, colliding] = FNV1A32_COLLISION
      const flush = {
        type: "effect.stream",
        commandId: StreamChunks.chunkCommandId("job:s", 1, 0, text.length),
        effectId: "job:s",
        aggregateType: "job",
        aggregateId: "s",
        attempt: 1,
        start: 0,
        text
      }
      assert.isFalse((yield* engine.dispatchWithReceipt(flush, { origin: "internal" })).duplicate)
      const resent = yield* Effect.either(
        engine.dispatchWithReceipt({ ...flush, text: colliding }, { origin: "internal" })
      )
      assert.deepStrictEqual(resent._tag === "Left" ? resent.left._tag : "answered as a duplicate", "CommandIdConflict")
      // Naming the channel's start where it is implied (the attempt's start) is the same command.
      const explicit = { ...flush, channel: "", channelStart: 0 }
      assert.isTrue((yield* engine.dispatchWithReceipt(explicit, { origin: "internal" })).duplicate)
      assert.deepStrictEqual(
        (yield* chunksOf("job:s")).map((c) => c.text),
        [text]
      )
    }).pipe(
      // Opened however the test ends, so a failed assertion fails it instead of leaving the job gated.
      Effect.ensuring(running.open),
      Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() }))
    )
  })

  it.effect("a stale attempt's flush is rejected and writes nothing", () => {
    const { handler, running, start } = gatedRunningJob()
    return Effect.gen(function* () {
      const engine = yield* start
      const flush = (attempt: number) => ({
        type: "effect.stream",
        commandId: StreamChunks.chunkCommandId("job:s", attempt, 0, 3),
        effectId: "job:s",
        aggregateType: "job",
        aggregateId: "s",
        attempt,
        start: 0,
        text: "old"
      })
      const wrongAttempt = yield* Effect.flip(engine.dispatchWithReceipt(flush(2), { origin: "internal" }))
      assert.deepStrictEqual(
        [wrongAttempt._tag, wrongAttempt._tag === "CommandRejected" && wrongAttempt.reason],
        ["CommandRejected", "stale-stream"]
      )
      yield* running.open
      yield* eventually(
        rowIs("job:s", (r) => r.status === "succeeded"),
        "settled"
      )
      // The attempt settled: its late flush is stale too.
      const late = yield* Effect.flip(engine.dispatchWithReceipt(flush(1), { origin: "internal" }))
      assert.deepStrictEqual(
        [late._tag, late._tag === "CommandRejected" && late.reason],
        ["CommandRejected", "stale-stream"]
      )
      assert.deepStrictEqual(yield* chunksOf("job:s"), [])
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })

  it.effect("a chunk behind its effect's settlement in one batch reads the row as the batch left it: stale", () => {
    const { handler, running, start } = gatedRunningJob()
    return Effect.gen(function* () {
      const engine = yield* start
      const attempt = (yield* Outbox.find("job:s"))!.attempts
      const succeed = {
        type: "effect.succeed",
        commandId: `outcome:job:s#${attempt}:test`,
        effectId: "job:s",
        attempt,
        aggregateType: "job",
        aggregateId: "s",
        by: "reactor",
        response: { ok: true }
      }
      const chunk = {
        type: "effect.stream",
        commandId: StreamChunks.chunkCommandId("job:s", attempt, 0, 4),
        effectId: "job:s",
        aggregateType: "job",
        aggregateId: "s",
        attempt,
        start: 0,
        text: "late"
      }
      const before = (yield* engine.stats).transactions
      // Both are queued before the processor runs again: one batch, the settlement first.
      const [settled, late] = yield* Effect.all(
        [succeed, chunk].map((command) => Effect.either(engine.dispatchWithReceipt(command, { origin: "internal" }))),
        { concurrency: "unbounded" }
      )
      assert.strictEqual((yield* engine.stats).transactions - before, 1, "one batch")
      assert.isTrue(settled!._tag === "Right")
      const lateAnswer = late!
      assert.deepStrictEqual(
        lateAnswer._tag === "Left"
          ? [lateAnswer.left._tag, lateAnswer.left._tag === "CommandRejected" && lateAnswer.left.reason]
          : [],
        ["CommandRejected", "stale-stream"]
      )
      assert.deepStrictEqual(yield* chunksOf("job:s"), [])
      yield* running.open
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })

  it.effect("an ingest of a stale attempt fails with reason stale at its first flush and records nothing", () => {
    const { handler, running, start } = gatedRunningJob()
    return Effect.gen(function* () {
      yield* start
      const row = (yield* Outbox.find("job:s"))!
      const failure = yield* Effect.scoped(
        Effect.gen(function* () {
          const ingest = yield* StreamIngest.make({ effect: { ...row, attempts: row.attempts - 1 } })
          yield* ingest.write("late words")
          return yield* Effect.flip(ingest.flush)
        })
      )
      assert.deepStrictEqual([failure.reason, failure.code], ["stale", "stream-stale"])
      assert.deepStrictEqual(yield* chunksOf("job:s"), [])
      yield* running.open
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })

  it.effect("a flush refused by the store keeps its batch and lands it, once, when the fault clears", () => {
    const handler = scriptedHandler()
    const input = feed()
    const faults = flushFaults()
    let ingest: StreamIngest.StreamIngest | undefined
    return Effect.gen(function* () {
      handler.behaviors.set(
        "job:s",
        yield* streaming(
          input.producer,
          { flushBytes: 4, retry: { maxRetries: 20, base: "100 millis", cap: "1 second" } },
          (i) => {
            ingest = i
          }
        )
      )
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("s", "work.safe"))
      yield* eventually(
        rowIs("job:s", (r) => r.status === "running"),
        "running"
      )
      faults.refusing.on = true
      yield* input.send("abcd")
      yield* eventually(
        Effect.sync(() => faults.refusing.refused >= 1),
        "refused once"
      )
      yield* TestClock.adjust("100 millis")
      yield* eventually(
        Effect.sync(() => faults.refusing.refused >= 2),
        "re-sent"
      )
      assert.deepStrictEqual(yield* chunksOf("job:s"), [])
      assert.strictEqual((yield* ingest!.stats).bufferedBytes, 4)
      faults.refusing.on = false
      yield* TestClock.adjust("1 second")
      yield* eventually(chunkCount("job:s", 1), "landed")
      const [chunk] = yield* chunksOf("job:s")
      assert.deepStrictEqual([chunk!.text, chunk!.commandId], ["abcd", "ingest:stream:job:s#1:0-4"])
      assert.deepStrictEqual(yield* ingest!.stats, { bufferedBytes: 0, committedEnd: 4, flushes: 1 })
      yield* input.send(END)
      yield* eventually(
        rowIs("job:s", (r) => r.status === "succeeded"),
        "succeeded"
      )
    }).pipe(
      Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() }).pipe(Layer.provide(faults.layer)))
    )
  })

  it.effect("a fault that never clears fails the effect with reason storage and the driver's code", () => {
    const handler = scriptedHandler()
    const input = feed()
    const faults = flushFaults("SQLITE_FULL")
    return Effect.gen(function* () {
      handler.behaviors.set(
        "job:s",
        yield* streaming(input.producer, {
          flushBytes: 4,
          retry: { maxRetries: 3, base: "100 millis", cap: "1 second" }
        })
      )
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("s", "work.safe"))
      yield* eventually(
        rowIs("job:s", (r) => r.status === "running"),
        "running"
      )
      faults.refusing.on = true
      yield* input.send("abcd")
      for (let i = 0; i < 6; i++) {
        yield* settle
        yield* TestClock.adjust("1 second")
      }
      yield* eventually(
        rowIs("job:s", (r) => r.status === "failed"),
        "failed"
      )
      const row = yield* Outbox.find("job:s")
      const error = row!.error as { reason: string; code: string; message: string }
      assert.deepStrictEqual([error.reason, error.code], ["storage", "SQLITE_FULL"])
      assert.strictEqual(faults.refusing.refused, 4)
      assert.deepStrictEqual(yield* chunksOf("job:s"), [])
    }).pipe(
      Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() }).pipe(Layer.provide(faults.layer)))
    )
  })

  it.effect("a full buffer slows the producer until its flushes commit (bounded memory)", () => {
    const handler = scriptedHandler()
    const faults = flushFaults()
    let ingest: StreamIngest.StreamIngest | undefined
    const ready = Effect.runSync(Deferred.make<void>())
    const release = Effect.runSync(Deferred.make<void>())
    let written = 0
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const services = yield* streamServices
      handler.behaviors.set("job:s", (row) =>
        Effect.scoped(
          Effect.gen(function* () {
            ingest = yield* StreamIngest.make({
              effect: row,
              flushBytes: 4,
              maxBufferedBytes: 8,
              retry: { maxRetries: 50, base: "100 millis", cap: "100 millis" }
            })
            yield* Deferred.succeed(ready, undefined)
            for (let i = 0; i < 6; i++) {
              yield* ingest.write(`p${i}__`)
              written++
            }
            yield* Deferred.await(release)
            yield* ingest.flush
            return yield* ingest.stats
          })
        ).pipe(Effect.mapError(StreamIngest.toEffectFailure), Effect.provide(services))
      )
      faults.refusing.on = true
      yield* engine.dispatchWithReceipt(submit("s", "work.safe"))
      yield* Deferred.await(ready)
      yield* eventually(
        Effect.sync(() => faults.refusing.refused >= 1),
        "first flush refused"
      )
      yield* settle
      // p0 is in flight, p1 buffered: 8 bytes, the bound. p2 waits for room.
      assert.strictEqual(written, 2)
      assert.strictEqual((yield* ingest!.stats).bufferedBytes, 8)
      yield* TestClock.adjust("300 millis")
      yield* settle
      assert.strictEqual(written, 2)
      faults.refusing.on = false
      for (let i = 0; i < 10 && written < 6; i++) {
        yield* TestClock.adjust("100 millis")
        yield* settle
      }
      assert.strictEqual(written, 6)
      assert.isAtMost((yield* ingest!.stats).bufferedBytes, 8)
      yield* Deferred.succeed(release, undefined)
      yield* eventually(
        rowIs("job:s", (r) => r.status === "succeeded"),
        "succeeded"
      )
      const chunks = yield* chunksOf("job:s")
      assert.strictEqual(chunks.map((c) => c.text).join(""), "p0__p1__p2__p3__p4__p5__")
    }).pipe(
      Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() }).pipe(Layer.provide(faults.layer)))
    )
  })

  it.effect("streams sharing a budget hold at most its bytes together: one waits until another's flush commits", () => {
    const handler = scriptedHandler()
    const faults = flushFaults()
    const budget = Effect.runSync(StreamIngest.makeBudget(8))
    const release = Effect.runSync(Deferred.make<void>())
    const written = { a: 0, b: 0 }
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const services = yield* streamServices
      const behavior = (name: "a" | "b", piece: string) => (row: OutboxRow) =>
        Effect.scoped(
          Effect.gen(function* () {
            const ingest = yield* StreamIngest.make({
              effect: row,
              flushBytes: 8,
              budget,
              retry: { maxRetries: 50, base: "100 millis", cap: "100 millis" }
            })
            yield* ingest.write(piece)
            written[name]++
            yield* Deferred.await(release)
            yield* ingest.flush
            return yield* ingest.stats
          })
        ).pipe(Effect.mapError(StreamIngest.toEffectFailure), Effect.provide(services))
      handler.behaviors.set("job:a", behavior("a", "aaaaaaaa"))
      handler.behaviors.set("job:b", behavior("b", "b"))
      faults.refusing.on = true
      yield* engine.dispatchWithReceipt(submit("a", "work.safe"))
      yield* eventually(
        Effect.sync(() => written.a === 1 && faults.refusing.refused >= 1),
        "a holds the whole budget"
      )
      yield* engine.dispatchWithReceipt(submit("b", "work.safe"))
      yield* eventually(
        rowIs("job:b", (r) => r.status === "running"),
        "b running"
      )
      yield* settle
      assert.strictEqual(written.b, 0)
      faults.refusing.on = false
      yield* TestClock.adjust("100 millis")
      yield* eventually(
        Effect.sync(() => written.b === 1),
        "b wrote once a committed"
      )
      assert.deepStrictEqual(
        (yield* chunksOf("job:a")).map((c) => c.text),
        ["aaaaaaaa"]
      )
      yield* Deferred.succeed(release, undefined)
      yield* eventually(
        rowIs("job:b", (r) => r.status === "succeeded"),
        "b succeeded"
      )
      assert.deepStrictEqual(
        (yield* chunksOf("job:b")).map((c) => c.text),
        ["b"]
      )
      // Every permit came back.
      assert.isTrue(Option.isSome(yield* budget.semaphore.withPermitsIfAvailable(8)(Effect.void)))
    }).pipe(
      Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() }).pipe(Layer.provide(faults.layer)))
    )
  })

  it.effect(
    "each attempt streams from offset 0 under its own ids; a reader gets every attempt's chunks in order",
    () => {
      const handler = scriptedHandler()
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const services = yield* streamServices
        handler.behaviors.set("job:s", (row) =>
          StreamIngest.run({ effect: row }, Stream.make(row.attempts === 1 ? "first try" : "second")).pipe(
            Effect.mapError(StreamIngest.toEffectFailure),
            Effect.zipRight(
              row.attempts === 1
                ? Effect.fail(new EffectFailure({ message: "provider hung up", retryable: true }))
                : Effect.succeed("done")
            ),
            Effect.provide(services)
          )
        )
        yield* engine.dispatchWithReceipt(submit("s", "work.safe"))
        yield* eventually(
          rowIs("job:s", (r) => r.status === "pending" && r.attempts === 1),
          "retrying"
        )
        yield* TestClock.adjust("1 second")
        yield* eventually(
          rowIs("job:s", (r) => r.status === "succeeded"),
          "succeeded"
        )
        const chunks = yield* chunksOf("job:s")
        assert.deepStrictEqual(
          chunks.map((c) => [c.attempt, c.start, c.end, c.text, c.commandId]),
          [
            [1, 0, 9, "first try", "ingest:stream:job:s#1:0-9"],
            [2, 0, 6, "second", "ingest:stream:job:s#2:0-6"]
          ]
        )
        // Read after a position: only what follows it.
        const after = yield* engine.readStreamChunks("job:s", { after: { attempt: 1, end: 9 } })
        assert.deepStrictEqual(
          after.map((c) => c.text),
          ["second"]
        )
      }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
    }
  )

  it.effect("a reader catches up on an effect's chunks, follows new ones and ends when the effect settles", () => {
    const handler = scriptedHandler()
    const input = feed()
    return Effect.gen(function* () {
      handler.behaviors.set("job:s", yield* streaming(input.producer, { flushBytes: 2 }))
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("s", "work.safe"))
      yield* eventually(
        rowIs("job:s", (r) => r.status === "running"),
        "running"
      )
      yield* input.send("ab")
      yield* eventually(chunkCount("job:s", 1), "first chunk")
      const follower = yield* Effect.fork(Stream.runCollect(engine.followStreamChunks("job:s")))
      yield* settle
      yield* input.send("cd")
      yield* eventually(chunkCount("job:s", 2), "second chunk")
      yield* input.send("ef")
      yield* input.send(END)
      yield* eventually(
        rowIs("job:s", (r) => r.status === "succeeded"),
        "succeeded"
      )
      const followed = yield* Fiber.join(follower)
      assert.deepStrictEqual(
        Chunk.toReadonlyArray(followed).map((c) => c.text),
        ["ab", "cd", "ef"]
      )
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })

  it.effect("compaction deletes the chunks of settled effects only; retention prunes them with their row", () => {
    const handler = scriptedHandler()
    const input = feed()
    const running = gated()
    handler.behaviors.set("job:live", running.behavior)
    return Effect.gen(function* () {
      handler.behaviors.set("job:done", yield* streaming(input.producer, { flushBytes: 1 }))
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("done", "work.safe"))
      yield* engine.dispatchWithReceipt(submit("live", "work.safe"))
      yield* eventually(
        rowIs("job:live", (r) => r.status === "running"),
        "live running"
      )
      yield* engine.dispatchWithReceipt(
        {
          type: "effect.stream",
          commandId: StreamChunks.chunkCommandId("job:live", 1, 0, 4),
          effectId: "job:live",
          aggregateType: "job",
          aggregateId: "live",
          attempt: 1,
          start: 0,
          text: "live"
        },
        { origin: "internal" }
      )
      yield* eventually(
        rowIs("job:done", (r) => r.status === "running"),
        "done running"
      )
      yield* input.send("x")
      yield* input.send(END)
      yield* eventually(
        rowIs("job:done", (r) => r.status === "succeeded"),
        "done settled"
      )
      assert.strictEqual((yield* chunksOf("job:done")).length, 1)
      // Retention keeps the chunks of an effect settled within its period.
      assert.strictEqual((yield* Retention.pruneOnce({ settledEffects: "1 hour" })).streamChunks, 0)
      assert.strictEqual((yield* chunksOf("job:done")).length, 1)
      const deleted = yield* StreamChunks.compactSettled()
      assert.strictEqual(deleted.length, 1)
      assert.deepStrictEqual(yield* chunksOf("job:done"), [])
      assert.deepStrictEqual(
        (yield* chunksOf("job:live")).map((c) => c.text),
        ["live"]
      )
      // Once settled past its period, retention prunes the row and its chunks with it.
      yield* running.open
      yield* eventually(
        rowIs("job:live", (r) => r.status === "succeeded"),
        "live settled"
      )
      yield* TestClock.adjust("2 millis")
      const pruned = yield* Retention.pruneOnce({ settledEffects: "1 millis" })
      assert.strictEqual(pruned.streamChunks, 1)
      assert.isAtLeast(pruned.effects, 1)
      assert.deepStrictEqual(yield* chunksOf("job:live"), [])
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })
})

/** A domain that projects its effect's stream: `onStream` records each chunk as an event of its own. */
const DraftEvent = Schema.Union(
  Aggregate.event("draft.asked", {}),
  Aggregate.event("draft.delta", { attempt: Schema.Number, start: Schema.Number, text: Schema.String })
)
type DraftEvent = typeof DraftEvent.Type
const Draft = Aggregate.make({
  name: "draft",
  commands: { "draft.ask": Aggregate.command("draft.ask", { draftId: Schema.String }) },
  events: DraftEvent,
  aggregateId: (command) => command.draftId,
  initialState: { deltas: 0 },
  evolve: (state: { deltas: number }, event: DraftEvent) =>
    event.type === "draft.delta" ? { deltas: state.deltas + 1 } : state,
  decide: () =>
    Decision.of<DraftEvent>({
      events: [{ type: "draft.asked" }],
      effects: [{ id: "draft:d", kind: "work.safe", payload: {} }]
    }),
  onStream: (_state, chunk) =>
    Decision.of<DraftEvent>({
      events: [{ type: "draft.delta", attempt: chunk.attempt, start: chunk.start, text: chunk.text }]
    })
})

describe("the owning aggregate hears its effect's chunks", () => {
  it.effect("onStream's events commit with the chunk, under the chunk's command id", () => {
    const handler = scriptedHandler()
    const input = feed()
    return Effect.gen(function* () {
      handler.behaviors.set("draft:d", yield* streaming(input.producer, { flushBytes: 3 }))
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt({ commandId: "ask-1", type: "draft.ask", draftId: "d" })
      yield* eventually(
        rowIs("draft:d", (r) => r.status === "running"),
        "running"
      )
      yield* input.send("abc")
      yield* input.send("de")
      yield* input.send(END)
      yield* eventually(
        rowIs("draft:d", (r) => r.status === "succeeded"),
        "succeeded"
      )
      const chunks = yield* chunksOf("draft:d")
      const deltas = (yield* engine.readEvents({ aggregateId: "d" })).filter((e) => e.type === "draft.delta")
      assert.deepStrictEqual(
        deltas.map((e) => [e.commandId, (e.payload as { text: string }).text]),
        chunks.map((c) => [c.commandId, c.text])
      )
      assert.strictEqual(chunks.map((c) => c.text).join(""), "abcde")
      assert.isAbove(deltas.length, 0)
    }).pipe(
      Effect.provide(
        stack([testReactor(handler.handle)], { filename: tempDbFile(), engine: { aggregates: [Job, Draft] } })
      )
    )
  })
})

describe("StreamIngest.toEffectFailure (pure)", () => {
  const base = { effectId: "e", attempt: 3, message: "m" }
  it("a store that refused the stream fails the effect with reason storage and the driver's code, final", () => {
    const failure = StreamIngest.toEffectFailure(
      new StreamIngest.StreamNotRecorded({ ...base, reason: "storage", code: "SQLITE_FULL" })
    )
    assert.deepStrictEqual([failure.reason, failure.code, failure.retryable], ["storage", "SQLITE_FULL", false])
  })
  it("a stale or refused stream is the handler's failure, with its code", () => {
    const stale = StreamIngest.toEffectFailure(
      new StreamIngest.StreamNotRecorded({ ...base, reason: "stale", code: "stream-stale" })
    )
    assert.deepStrictEqual([stale.reason, stale.code, stale.retryable], ["handler", "stream-stale", false])
  })
})

describe("StreamChunks.decideChunk (pure)", () => {
  const row = {
    effectId: "e",
    kind: "k",
    aggregateType: "a",
    aggregateId: "1",
    status: "running" as const,
    attempts: 2
  }
  const command = { effectId: "e", aggregateType: "a", aggregateId: "1", attempt: 2, start: 5, text: "xyz" }

  it("appends at the recorded end of a running row's attempt", () => {
    const verdict = StreamChunks.decideChunk(row, command, 5, 0)
    assert.deepStrictEqual(verdict, {
      _tag: "Append",
      notice: { effectId: "e", kind: "k", attempt: 2, start: 5, end: 8, text: "xyz", channel: "", channelStart: 5 }
    })
  })

  it("a row cancelled at the chunk's attempt takes it while its performer holds the lease (its stopping tail), not after", () => {
    const cancelled = { ...row, status: "cancelled" as const, leaseExpiresAt: 1_000 }
    const now = 999
    assert.strictEqual(
      StreamChunks.decideChunk({ ...cancelled, leaseOwner: "owner-1" }, command, 5, now)._tag,
      "Append"
    )
    assert.strictEqual(StreamChunks.decideChunk({ ...cancelled, leaseOwner: null }, command, 5, now)._tag, "Stale")
    assert.strictEqual(
      StreamChunks.decideChunk({ ...cancelled, leaseOwner: "owner-1" }, { ...command, attempt: 1 }, 5, now)._tag,
      "Stale"
    )
    assert.strictEqual(
      StreamChunks.decideChunk({ ...row, status: "succeeded" as never, leaseOwner: "owner-1" }, command, 5, now)._tag,
      "Stale"
    )
    // The lease has ended: followers ended the stream then (ReadSide), so the table takes no more either.
    assert.strictEqual(
      StreamChunks.decideChunk({ ...cancelled, leaseOwner: "owner-1" }, command, 5, 1_000)._tag,
      "Stale"
    )
  })

  it("is stale for another attempt, a settled row, another aggregate or no row", () => {
    assert.strictEqual(StreamChunks.decideChunk(row, { ...command, attempt: 1 }, 5, 0)._tag, "Stale")
    assert.strictEqual(StreamChunks.decideChunk({ ...row, status: "succeeded" as never }, command, 5, 0)._tag, "Stale")
    assert.strictEqual(StreamChunks.decideChunk(row, { ...command, aggregateId: "2" }, 5, 0)._tag, "Stale")
    assert.strictEqual(StreamChunks.decideChunk(undefined, command, 0, 0)._tag, "Stale")
  })

  it("a chunk id is deterministic and fits the id rules even for the longest effect id", () => {
    const long = `tool:${"t".repeat(CommandId.EFFECT_ID_MAX - 5)}`
    const id = StreamChunks.chunkCommandId(long, 3, 0, 4096)
    assert.strictEqual(id, StreamChunks.chunkCommandId(long, 3, 0, 4096))
    assert.notStrictEqual(id, StreamChunks.chunkCommandId(long, 3, 4096, 8192))
    assert.isTrue(id.startsWith("ingest:stream:"))
    assert.isUndefined(CommandId.commandIdProblem(id, "internal"))
  })

  it("a chunk's fingerprint tells apart texts that 32-bit FNV-1a does not, with a 64-bit digest", () => {
    const [text, colliding] = FNV1A32_COLLISION
    assert.strictEqual(fnv1a32(text), fnv1a32(colliding), "the premise: these collide in 32-bit FNV-1a")
    assert.strictEqual(text.length, colliding.length)
    const flush: StreamChunks.EffectStream = {
      type: "effect.stream",
      commandId: "ingest:stream:x",
      ...command,
      text
    }
    assert.notStrictEqual(
      StreamChunks.chunkFingerprint(flush),
      StreamChunks.chunkFingerprint({ ...flush, text: colliding })
    )
    assert.strictEqual(StreamChunks.chunkFingerprint(flush), StreamChunks.chunkFingerprint({ ...flush }))
    assert.match(StreamChunks.textDigest(text), /^[0-9a-f]{16}$/)
    assert.match(StreamChunks.textDigest("a"), /^[0-9a-f]{16}$/, "fixed width, leading zeros kept")
    assert.strictEqual(
      StreamChunks.textDigest(text),
      StreamChunks.textDigest(["kvs", "datov"].join("")),
      "deterministic"
    )
  })

  it("a chunk's fingerprint is the same with its implied channel fields named or left out", () => {
    const flush: StreamChunks.EffectStream = { type: "effect.stream", commandId: "ingest:stream:x", ...command }
    const bare = StreamChunks.chunkFingerprint(flush)
    assert.strictEqual(StreamChunks.chunkFingerprint({ ...flush, channel: "", channelStart: command.start }), bare)
    assert.notStrictEqual(StreamChunks.chunkFingerprint({ ...flush, channelStart: command.start + 1 }), bare)
    assert.notStrictEqual(StreamChunks.chunkFingerprint({ ...flush, channel: "tool-1" }), bare)
  })

  it("refuses a gap or an overlap", () => {
    assert.strictEqual(StreamChunks.decideChunk(row, command, 4, 0)._tag, "OutOfOrder")
    assert.strictEqual(StreamChunks.decideChunk(row, command, 6, 0)._tag, "OutOfOrder")
  })
})
