/**
 * Stream tails: the chunks this process committed last, answering a reader at a live attempt's end
 * without reading the table. The rule under test: a tail answers exactly what the table would (or
 * says it cannot), never a chunk that did not commit, never one the table no longer holds. The
 * first part is the pure structure, given/when/then; the second runs the engine on a real SQLite
 * file (the one-writer store that keeps tails) and compares every answer with the table's.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Queue, Stream, TestClock } from "effect"
import { Engine, Retention, StreamChunks, StreamTails } from "../src/index.js"
import * as Outbox from "../src/Outbox.js"
import * as Tails from "../src/StreamTails.js"
import { tempDbFile } from "./fixtures/harness.js"
import { submit } from "./fixtures/Jobs.js"
import { eventually, flushFaults, scriptedHandler, stack, streaming, testReactor } from "./fixtures/reactors.js"

const chunk = (attempt: number, start: number, text: string, effectId = "e"): StreamChunks.StreamChunk => ({
  effectId,
  attempt,
  start,
  end: start + text.length,
  text,
  commandId: StreamChunks.chunkCommandId(effectId, attempt, start, start + text.length),
  committedAt: 0,
  channel: "",
  channelStart: start
})

const texts = (chunks: ReadonlyArray<StreamChunks.StreamChunk> | undefined) => chunks?.map((c) => c.text)

describe("stream tails (pure)", () => {
  it("answers the chunks at or after the position, up to the limit", () => {
    // given a tail of three committed chunks of attempt 1
    const tails = Tails.make()
    tails.committed([chunk(1, 0, "ab"), chunk(1, 2, "cd"), chunk(1, 4, "ef")])
    // when readers at each boundary ask, then they get what follows, in order
    assert.deepStrictEqual(texts(tails.read("e", { attempt: 1, end: 0 }, 10)), ["ab", "cd", "ef"])
    assert.deepStrictEqual(texts(tails.read("e", { attempt: 1, end: 2 }, 10)), ["cd", "ef"])
    assert.deepStrictEqual(texts(tails.read("e", { attempt: 1, end: 2 }, 1)), ["cd"])
    assert.deepStrictEqual(texts(tails.read("e", { attempt: 1, end: 6 }, 10)), [])
    // and an effect it never saw, or another attempt, is the table's to answer
    assert.strictEqual(tails.read("other", { attempt: 1, end: 0 }, 10), undefined)
    assert.strictEqual(tails.read("e", { attempt: 0, end: 0 }, 10), undefined)
  })

  it("a new attempt's first chunk replaces the tail; the old attempt is the table's again", () => {
    const tails = Tails.make()
    tails.committed([chunk(1, 0, "old")])
    tails.committed([chunk(2, 0, "new")])
    assert.strictEqual(tails.read("e", { attempt: 1, end: 0 }, 10), undefined)
    assert.deepStrictEqual(texts(tails.read("e", { attempt: 2, end: 0 }, 10)), ["new"])
  })

  it("keeps its newest chunks only: a reader further behind is sent to the table", () => {
    const tails = Tails.make({ chunksPerTail: 2, totalUnits: 1_000 })
    tails.committed([chunk(1, 0, "a"), chunk(1, 1, "b"), chunk(1, 2, "c")])
    assert.strictEqual(tails.read("e", { attempt: 1, end: 0 }, 10), undefined)
    assert.deepStrictEqual(texts(tails.read("e", { attempt: 1, end: 1 }, 10)), ["b", "c"])
  })

  it("holds at most its total text: the least recently written tail goes first", () => {
    const tails = Tails.make({ chunksPerTail: 10, totalUnits: 6 })
    tails.committed([chunk(1, 0, "aaa", "x"), chunk(1, 0, "bbb", "y")])
    // x is written again, so y is now the least recently written
    tails.committed([chunk(1, 3, "a", "x")])
    assert.strictEqual(tails.read("y", { attempt: 1, end: 0 }, 10), undefined)
    assert.deepStrictEqual(texts(tails.read("x", { attempt: 1, end: 0 }, 10)), ["aaa", "a"])
  })

  it("forgets settled and compacted effects; `none` never answers", () => {
    const tails = Tails.make()
    tails.committed([chunk(1, 0, "ab")])
    tails.forget(["e"])
    assert.strictEqual(tails.read("e", { attempt: 1, end: 0 }, 10), undefined)
    Tails.none.committed([chunk(1, 0, "ab")])
    assert.strictEqual(Tails.none.read("e", { attempt: 1, end: 0 }, 10), undefined)
  })
})

const END = "\u0000end"

describe("stream tails on the engine (SQLite file)", () => {
  it.effect(
    "every read answered by the tail equals the table's, a refused flush included; compaction empties it",
    () => {
      const handler = scriptedHandler()
      const queue = Effect.runSync(Queue.unbounded<string>())
      const faults = flushFaults("SQLITE_IOERR")
      return Effect.gen(function* () {
        handler.behaviors.set(
          "job:s",
          yield* streaming(Stream.fromQueue(queue).pipe(Stream.takeWhile((piece) => piece !== END)), {
            flushBytes: 3,
            retry: { maxRetries: 20, base: "100 millis", cap: "100 millis" }
          })
        )
        const engine = yield* Engine.Engine
        const tails = yield* StreamTails
        const sql = yield* SqlClient
        const fromTable = (end: number) =>
          StreamChunks.read("job:s", { after: { attempt: 1, end }, limit: 500 }).pipe(
            Effect.provideService(SqlClient, sql)
          )
        const landed = (end: number) =>
          eventually(
            Effect.map(fromTable(0), (chunks) => chunks.at(-1)?.end === end),
            `landed to ${end}`
          )
        yield* engine.dispatchWithReceipt(submit("s", "work.safe"))
        yield* eventually(
          Effect.map(Outbox.find("job:s"), (row) => row?.status === "running"),
          "running"
        )
        yield* Queue.offer(queue, "abc")
        yield* landed(3)
        // A flush whose chunk row was written, then its receipt refused: the batch rolled back.
        faults.refusing.on = true
        yield* Queue.offer(queue, "def")
        yield* eventually(
          Effect.sync(() => faults.refusing.refused >= 1),
          "refused"
        )
        assert.deepStrictEqual(texts(tails.read("job:s", { attempt: 1, end: 0 }, 500)), ["abc"])
        faults.refusing.on = false
        yield* TestClock.adjust("100 millis")
        yield* landed(6)
        yield* Queue.offer(queue, "ghi")
        yield* landed(9)
        for (const end of [0, 3, 6, 9]) {
          const table = yield* fromTable(end)
          const tail = tails.read("job:s", { attempt: 1, end }, 500)
          assert.deepStrictEqual(tail, table, `at ${end}`)
          assert.deepStrictEqual(yield* engine.readStreamChunks("job:s", { after: { attempt: 1, end } }), table)
        }
        assert.deepStrictEqual(texts(yield* fromTable(0)), ["abc", "def", "ghi"])
        yield* Queue.offer(queue, END)
        yield* eventually(
          Effect.map(Outbox.find("job:s"), (row) => row?.status === "succeeded"),
          "succeeded"
        )
        // Settled: the table answers again.
        assert.strictEqual(tails.read("job:s", { attempt: 1, end: 0 }, 500), undefined)
        // A tail still held when compaction deletes its chunks (text a cancelled performer flushed as it
        // stopped, after its settlement) goes with them.
        tails.committed(yield* fromTable(0))
        assert.deepStrictEqual(texts(tails.read("job:s", { attempt: 1, end: 0 }, 500)), ["abc", "def", "ghi"])
        yield* TestClock.adjust("1 millis")
        const pruned = yield* Retention.pruneOnce({ settledStreams: "0 millis", settledEffects: "1 hour" })
        assert.strictEqual(pruned.streamChunks, 3)
        assert.strictEqual(tails.read("job:s", { attempt: 1, end: 0 }, 500), undefined)
        assert.deepStrictEqual(yield* engine.readStreamChunks("job:s", { after: { attempt: 1, end: 0 } }), [])
      }).pipe(
        Effect.provide(
          stack([testReactor(handler.handle)], { filename: tempDbFile() }).pipe(Layer.provide(faults.layer))
        )
      )
    }
  )
})
