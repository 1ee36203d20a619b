/**
 * Channels of one stream and well-formed chunk boundaries: a writer may stream several texts of one
 * attempt side by side (a model's answer and each tool call's arguments); each lands in its own
 * chunks with its own offsets, in the attempt's one order; and no chunk ends between the halves of
 * a UTF-16 surrogate pair, however the producer cut its writes. Real store files, TestClock.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Queue, Stream, TestClock } from "effect"
import { driverError, Engine, StorageFaults, StreamChunks, type StreamIngest } from "../src/index.js"
import * as Outbox from "../src/Outbox.js"
import { tempDbFile } from "./fixtures/harness.js"
import { submit } from "./fixtures/Jobs.js"
import { eventually, scriptedHandler, settle, stack, streaming, testReactor } from "./fixtures/reactors.js"

interface Piece {
  readonly text: string
  readonly channel?: string
}
const END: Piece = { text: "\u0000end" }

/**
 * Starts job `name` whose handler writes the pieces the test feeds (`feed`), each to its channel,
 * until END; answers once its row runs.
 */
const startJob = (
  handler: ReturnType<typeof scriptedHandler>,
  name: string,
  options: Omit<StreamIngest.StreamIngestOptions, "effect"> = {}
) =>
  Effect.gen(function* () {
    const queue = yield* Queue.unbounded<Piece>()
    handler.behaviors.set(
      `job:${name}`,
      yield* streaming(Stream.fromQueue(queue).pipe(Stream.takeWhile((piece) => piece !== END)), options)
    )
    yield* (yield* Engine.Engine).dispatchWithReceipt(submit(name, "work.safe"))
    yield* running(`job:${name}`)
    return { feed: (...pieces: ReadonlyArray<Piece>) => Effect.forEach(pieces, (p) => Queue.offer(queue, p)) }
  })

/** A stack on a fresh store file whose reactor performs with `handler`. */
const stackOf = (handler: ReturnType<typeof scriptedHandler>) =>
  stack([testReactor(handler.handle)], { filename: tempDbFile() })

const chunksOf = (effectId: string) =>
  Effect.flatMap(Engine.Engine, (engine) => engine.readStreamChunks(effectId, { limit: 10_000 }))

const succeeded = (effectId: string) =>
  eventually(
    Effect.map(Outbox.find(effectId), (row) => row?.status === "succeeded"),
    "succeeded"
  )

const running = (effectId: string) =>
  eventually(
    Effect.map(Outbox.find(effectId), (row) => row?.status === "running"),
    "running"
  )

/** No chunk text starts with a low surrogate or ends with a high one. */
const wellFormed = (text: string) => !/^[\udc00-\udfff]/.test(text) && !/[\ud800-\udbff]$/.test(text)

describe("stream channels", () => {
  it.effect("each channel's chunks concatenate to its text, with its own offsets, in the attempt's one order", () => {
    const handler = scriptedHandler()
    return Effect.gen(function* () {
      const job = yield* startJob(handler, "c")
      // All buffered before the first flush: one flush sends them as one command per channel run.
      yield* job.feed(
        { text: "Let me " },
        { text: "look." },
        { text: '{"path":', channel: "call_1" },
        { text: '"a.txt"}', channel: "call_1" },
        { text: '{"q":1}', channel: "call_2" }
      )
      yield* settle
      yield* TestClock.adjust("50 millis")
      yield* eventually(
        Effect.map(chunksOf("job:c"), (chunks) => chunks.length === 3),
        "three chunks"
      )
      yield* job.feed({ text: " Done." }, END)
      yield* succeeded("job:c")
      const chunks = yield* chunksOf("job:c")
      assert.deepStrictEqual(
        chunks.map((c) => [c.channel, c.channelStart, c.start, c.end, c.text]),
        [
          ["", 0, 0, 12, "Let me look."],
          ["call_1", 0, 12, 28, '{"path":"a.txt"}'],
          ["call_2", 0, 28, 35, '{"q":1}'],
          ["", 12, 35, 41, " Done."]
        ]
      )
      for (const c of chunks) assert.strictEqual(c.commandId, StreamChunks.chunkCommandId("job:c", 1, c.start, c.end))
    }).pipe(Effect.provide(stackOf(handler)))
  })

  it.effect("a window holding text and tool-call arguments lands in one transaction, not one per channel", () => {
    const handler = scriptedHandler()
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const job = yield* startJob(handler, "w")
      yield* job.feed(
        { text: "Reading " },
        { text: '{"path":"a"}', channel: "call_1" },
        { text: '{"q":1}', channel: "call_2" }
      )
      yield* settle
      const before = (yield* engine.stats).transactions
      yield* TestClock.adjust("50 millis")
      yield* eventually(
        Effect.map(chunksOf("job:w"), (chunks) => chunks.length === 3),
        "three chunks"
      )
      const transactions = (yield* engine.stats).transactions - before
      yield* job.feed(END)
      yield* succeeded("job:w")
      assert.strictEqual(transactions, 1, "the three runs of the window share one group commit")
      assert.deepStrictEqual(
        (yield* chunksOf("job:w")).map((c) => [c.channel, c.channelStart, c.start, c.end]),
        [
          ["", 0, 0, 8],
          ["call_1", 0, 8, 20],
          ["call_2", 0, 20, 27]
        ]
      )
    }).pipe(Effect.provide(stackOf(handler)))
  })

  it.effect("when the store refuses a window's first run, the runs sent with it land after it, none lost", () => {
    const handler = scriptedHandler()
    // The first run's receipt is refused (disk full) while `refusing`; the runs after it are not.
    const first = StreamChunks.chunkCommandId("job:r", 1, 0, 5)
    const faults = { refusing: true, refused: 0 }
    const layer = Layer.succeed(StorageFaults, {
      before: (point, commandId) =>
        Effect.suspend(() => {
          if (!faults.refusing || point !== "receipts" || commandId !== first) return Effect.void
          faults.refused++
          return Effect.fail(driverError("SQLITE_FULL", "SQLITE_FULL: injected at receipts"))
        })
    })
    return Effect.gen(function* () {
      const job = yield* startJob(handler, "r", { retry: { maxRetries: 20, base: "100 millis", cap: "1 second" } })
      yield* job.feed({ text: "Hello" }, { text: '{"a":1}', channel: "call_1" }, { text: " there" })
      yield* settle
      yield* TestClock.adjust("50 millis")
      yield* eventually(
        Effect.sync(() => faults.refused >= 1),
        "the first run refused"
      )
      yield* TestClock.adjust("100 millis")
      yield* eventually(
        Effect.sync(() => faults.refused >= 2),
        "the first run re-sent"
      )
      assert.deepStrictEqual(yield* chunksOf("job:r"), [])
      faults.refusing = false
      yield* TestClock.adjust("1 second")
      yield* eventually(
        Effect.map(chunksOf("job:r"), (chunks) => chunks.length === 3),
        "all three landed"
      )
      yield* job.feed(END)
      yield* succeeded("job:r")
      const chunks = yield* chunksOf("job:r")
      assert.deepStrictEqual(
        chunks.map((c) => [c.channel, c.start, c.end, c.text]),
        [
          ["", 0, 5, "Hello"],
          ["call_1", 5, 12, '{"a":1}'],
          ["", 12, 18, " there"]
        ]
      )
      for (const c of chunks) assert.strictEqual(c.commandId, StreamChunks.chunkCommandId("job:r", 1, c.start, c.end))
    }).pipe(Effect.provide(stackOf(handler).pipe(Layer.provide(layer))))
  })

  it.effect("a command of the main text alone carries no channel fields (its id and payload are as before)", () => {
    const handler = scriptedHandler()
    return Effect.gen(function* () {
      const job = yield* startJob(handler, "m")
      yield* job.feed({ text: "plain" }, END)
      yield* succeeded("job:m")
      const [chunk] = yield* chunksOf("job:m")
      assert.deepStrictEqual([chunk!.channel, chunk!.channelStart, chunk!.text], ["", 0, "plain"])
    }).pipe(Effect.provide(stackOf(handler)))
  })
})

describe("chunk boundaries and surrogate pairs", () => {
  it.effect("a flush due while a write ended mid-pair keeps the high surrogate for the next chunk", () => {
    const emoji = "😀"
    const handler = scriptedHandler()
    return Effect.gen(function* () {
      const job = yield* startJob(handler, "s")
      // The producer cuts the pair: its first half, then a timed flush, then the second half.
      yield* job.feed({ text: `ab${emoji[0]}` })
      yield* settle
      yield* TestClock.adjust("50 millis")
      yield* eventually(
        Effect.map(chunksOf("job:s"), (chunks) => chunks.length === 1),
        "the timed flush"
      )
      yield* job.feed({ text: `${emoji[1]}cd${emoji}` }, END)
      yield* succeeded("job:s")
      const chunks = yield* chunksOf("job:s")
      assert.deepStrictEqual(
        chunks.map((c) => [c.start, c.end, c.text]),
        [
          [0, 2, "ab"],
          [2, 8, `${emoji}cd${emoji}`]
        ]
      )
    }).pipe(Effect.provide(stackOf(handler)))
  })

  it.effect("size flushes of emoji text cut only between whole characters; the chunks are the text", () => {
    const handler = scriptedHandler()
    const text = "👍🏽 ok 🎉🎉 ✓ 😀😀😀 fin 🧪"
    // Every UTF-16 unit alone: half of each pair arrives in its own write.
    const units = Array.from({ length: text.length }, (_, i) => text[i]!)
    return Effect.gen(function* () {
      const job = yield* startJob(handler, "e", { flushBytes: 5 })
      for (const unit of units) {
        yield* job.feed({ text: unit })
        yield* settle
      }
      yield* job.feed(END)
      yield* succeeded("job:e")
      const chunks = yield* chunksOf("job:e")
      assert.isAbove(chunks.length, 3)
      for (const c of chunks) assert.isTrue(wellFormed(c.text), `chunk ${c.start}-${c.end} splits a pair`)
      assert.strictEqual(chunks.map((c) => c.text).join(""), text)
    }).pipe(Effect.provide(stackOf(handler)))
  })

  it.effect(
    "a surrogate without its other half (mid-text or at the end) is recorded as one U+FFFD, offsets intact",
    () => {
      const handler = scriptedHandler()
      return Effect.gen(function* () {
        const job = yield* startJob(handler, "l")
        yield* job.feed({ text: "x\ude00y" }, { text: "z\ud83d" }, END)
        yield* succeeded("job:l")
        const chunks = yield* chunksOf("job:l")
        assert.strictEqual(chunks.map((c) => c.text).join(""), "x\ufffdyz\ufffd")
        for (const c of chunks) assert.strictEqual(c.end - c.start, c.text.length)
      }).pipe(Effect.provide(stackOf(handler)))
    }
  )
})
