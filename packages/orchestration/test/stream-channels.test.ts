/**
 * Channels of one stream and well-formed chunk boundaries: a writer may stream several texts of one
 * attempt side by side (a model's answer and each tool call's arguments); each lands in its own
 * chunks with its own offsets, in the attempt's one order; and no chunk ends between the halves of
 * a UTF-16 surrogate pair, however the producer cut its writes. Real store files, TestClock.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Queue, Stream, TestClock } from "effect"
import { Engine, StreamChunks, StreamIngest } from "../src/index.js"
import * as Outbox from "../src/Outbox.js"
import type { OutboxRow } from "../src/Outbox.js"
import { tempDbFile } from "./fixtures/harness.js"
import { submit } from "./fixtures/Jobs.js"
import { eventually, scriptedHandler, settle, stack, testReactor } from "./fixtures/reactors.js"

interface Piece {
  readonly text: string
  readonly channel?: string
}
const END: Piece = { text: "\u0000end" }

/** A handler that writes the pieces the test feeds it, each to its channel, then flushes. */
const channelled = (queue: Queue.Queue<Piece>, options: Omit<StreamIngest.StreamIngestOptions, "effect"> = {}) =>
  Effect.gen(function* () {
    const engine = yield* Engine.Engine
    return (row: OutboxRow) =>
      Effect.scoped(
        Effect.gen(function* () {
          const ingest = yield* StreamIngest.make({ effect: row, ...options })
          yield* Stream.fromQueue(queue).pipe(
            Stream.takeWhile((piece) => piece !== END),
            Stream.runForEach((piece) => ingest.write(piece.text, piece.channel))
          )
          yield* ingest.flush
          return yield* ingest.stats
        })
      ).pipe(Effect.mapError(StreamIngest.toEffectFailure), Effect.provideService(Engine.Engine, engine))
  })

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
    const queue = Effect.runSync(Queue.unbounded<Piece>())
    return Effect.gen(function* () {
      handler.behaviors.set("job:c", yield* channelled(queue))
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("c", "work.safe"))
      yield* running("job:c")
      // All buffered before the first flush: one flush sends them as one command per channel run.
      for (const piece of [
        { text: "Let me " },
        { text: "look." },
        { text: '{"path":', channel: "call_1" },
        { text: '"a.txt"}', channel: "call_1" },
        { text: '{"q":1}', channel: "call_2" }
      ])
        yield* Queue.offer(queue, piece)
      yield* settle
      yield* TestClock.adjust("50 millis")
      yield* eventually(
        Effect.map(chunksOf("job:c"), (chunks) => chunks.length === 3),
        "three chunks"
      )
      yield* Queue.offer(queue, { text: " Done." })
      yield* Queue.offer(queue, END)
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
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })

  it.effect("a command of the main text alone carries no channel fields (its id and payload are as before)", () => {
    const handler = scriptedHandler()
    const queue = Effect.runSync(Queue.unbounded<Piece>())
    return Effect.gen(function* () {
      handler.behaviors.set("job:m", yield* channelled(queue))
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("m", "work.safe"))
      yield* running("job:m")
      yield* Queue.offer(queue, { text: "plain" })
      yield* Queue.offer(queue, END)
      yield* succeeded("job:m")
      const [chunk] = yield* chunksOf("job:m")
      assert.deepStrictEqual([chunk!.channel, chunk!.channelStart, chunk!.text], ["", 0, "plain"])
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })
})

describe("chunk boundaries and surrogate pairs", () => {
  it.effect("a flush due while a write ended mid-pair keeps the high surrogate for the next chunk", () => {
    const handler = scriptedHandler()
    const queue = Effect.runSync(Queue.unbounded<Piece>())
    const emoji = "😀"
    return Effect.gen(function* () {
      handler.behaviors.set("job:s", yield* channelled(queue))
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("s", "work.safe"))
      yield* running("job:s")
      // The producer cuts the pair: its first half, then a timed flush, then the second half.
      yield* Queue.offer(queue, { text: `ab${emoji[0]}` })
      yield* settle
      yield* TestClock.adjust("50 millis")
      yield* eventually(
        Effect.map(chunksOf("job:s"), (chunks) => chunks.length === 1),
        "the timed flush"
      )
      yield* Queue.offer(queue, { text: `${emoji[1]}cd${emoji}` })
      yield* Queue.offer(queue, END)
      yield* succeeded("job:s")
      const chunks = yield* chunksOf("job:s")
      assert.deepStrictEqual(
        chunks.map((c) => [c.start, c.end, c.text]),
        [
          [0, 2, "ab"],
          [2, 8, `${emoji}cd${emoji}`]
        ]
      )
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })

  it.effect("size flushes of emoji text cut only between whole characters; the chunks are the text", () => {
    const handler = scriptedHandler()
    const queue = Effect.runSync(Queue.unbounded<Piece>())
    const text = "👍🏽 ok 🎉🎉 ✓ 😀😀😀 fin 🧪"
    // Every UTF-16 unit alone: half of each pair arrives in its own write.
    const units = Array.from({ length: text.length }, (_, i) => text[i]!)
    return Effect.gen(function* () {
      handler.behaviors.set("job:e", yield* channelled(queue, { flushBytes: 5 }))
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("e", "work.safe"))
      yield* running("job:e")
      for (const unit of units) {
        yield* Queue.offer(queue, { text: unit })
        yield* settle
      }
      yield* Queue.offer(queue, END)
      yield* succeeded("job:e")
      const chunks = yield* chunksOf("job:e")
      assert.isAbove(chunks.length, 3)
      for (const c of chunks) assert.isTrue(wellFormed(c.text), `chunk ${c.start}-${c.end} splits a pair`)
      assert.strictEqual(chunks.map((c) => c.text).join(""), text)
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })

  it.effect(
    "a surrogate without its other half (mid-text or at the end) is recorded as one U+FFFD, offsets intact",
    () => {
      const handler = scriptedHandler()
      const queue = Effect.runSync(Queue.unbounded<Piece>())
      return Effect.gen(function* () {
        handler.behaviors.set("job:l", yield* channelled(queue))
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(submit("l", "work.safe"))
        yield* running("job:l")
        yield* Queue.offer(queue, { text: "x\ude00y" })
        yield* Queue.offer(queue, { text: "z\ud83d" })
        yield* Queue.offer(queue, END)
        yield* succeeded("job:l")
        const chunks = yield* chunksOf("job:l")
        assert.strictEqual(chunks.map((c) => c.text).join(""), "x\ufffdyz\ufffd")
        for (const c of chunks) assert.strictEqual(c.end - c.start, c.text.length)
      }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
    }
  )
})
