/**
 * Stream ingestion against a real full disk (SQLite's own: `PRAGMA max_page_count` makes the file
 * refuse to grow, so the store answers SQLITE_FULL as a full volume would). SQLite only; the
 * conformance run covers injected faults on both stores (stream-ingest.test.ts).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Queue, Stream, TestClock } from "effect"
import { Engine, StreamIngest } from "../src/index.js"
import * as Outbox from "../src/Outbox.js"
import type { OutboxRow } from "../src/Outbox.js"
import { tempDbFile } from "./fixtures/harness.js"
import { submit } from "./fixtures/Jobs.js"
import { eventually, streamServices, scriptedHandler, settle, stack, testReactor } from "./fixtures/reactors.js"

const capDatabase = (extraPages: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const [row] = yield* sql<{ page_count: number }>`PRAGMA page_count`
    yield* sql.unsafe(`PRAGMA max_page_count = ${Number(row!.page_count) + extraPages}`)
  })

const uncap = Effect.flatMap(SqlClient, (sql) => sql.unsafe("PRAGMA max_page_count = 1073741823"))

const rowIs = (effectId: string, predicate: (row: OutboxRow) => boolean) =>
  Effect.map(Outbox.find(effectId), (row) => row !== undefined && predicate(row))

const chunksOf = (effectId: string) =>
  Effect.flatMap(Engine.Engine, (engine) => engine.readStreamChunks(effectId, { limit: 10_000 }))

describe("stream ingestion on a full disk (SQLITE_FULL)", () => {
  it.effect("a flush the full disk refuses stays buffered and lands once space returns", () => {
    const handler = scriptedHandler()
    const queue = Effect.runSync(Queue.unbounded<string>())
    const text = "x".repeat(40_000)
    let ingest: StreamIngest.StreamIngest | undefined
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const services = yield* streamServices
      handler.behaviors.set("job:s", (row) =>
        Effect.scoped(
          Effect.gen(function* () {
            ingest = yield* StreamIngest.make({
              effect: row,
              retry: { maxRetries: 50, base: "100 millis", cap: "100 millis" }
            })
            yield* Stream.runForEach(Stream.fromQueue(queue).pipe(Stream.takeWhile((p) => p !== "")), ingest.write)
            yield* ingest.flush
            return yield* ingest.stats
          })
        ).pipe(Effect.mapError(StreamIngest.toEffectFailure), Effect.provide(services))
      )
      yield* engine.dispatchWithReceipt(submit("s", "work.safe"))
      yield* eventually(
        rowIs("job:s", (r) => r.status === "running"),
        "running"
      )
      yield* capDatabase(2)
      yield* Queue.offer(queue, text)
      for (let i = 0; i < 3; i++) {
        yield* settle
        yield* TestClock.adjust("100 millis")
      }
      yield* settle
      assert.deepStrictEqual(yield* chunksOf("job:s"), [])
      assert.strictEqual((yield* ingest!.stats).bufferedBytes, text.length)
      yield* uncap
      yield* TestClock.adjust("100 millis")
      yield* eventually(
        Effect.map(chunksOf("job:s"), (c) => c.length === 1),
        "landed"
      )
      yield* Queue.offer(queue, "")
      yield* eventually(
        rowIs("job:s", (r) => r.status === "succeeded"),
        "succeeded"
      )
      const chunks = yield* chunksOf("job:s")
      assert.deepStrictEqual(
        chunks.map((c) => [c.start, c.end, c.text.length]),
        [[0, text.length, text.length]]
      )
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })

  it.effect(
    "a disk that stays full fails the effect with reason storage and SQLITE_FULL, recorded once space returns",
    () => {
      const handler = scriptedHandler()
      const text = "y".repeat(40_000)
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const services = yield* streamServices
        handler.behaviors.set("job:s", (row) =>
          StreamIngest.run(
            { effect: row, retry: { maxRetries: 2, base: "100 millis", cap: "100 millis" } },
            Stream.make(text)
          ).pipe(Effect.mapError(StreamIngest.toEffectFailure), Effect.provide(services))
        )
        yield* capDatabase(2)
        yield* engine.dispatchWithReceipt(submit("s", "work.safe"))
        yield* eventually(
          rowIs("job:s", (r) => r.status === "running"),
          "running"
        )
        for (let i = 0; i < 5; i++) {
          yield* settle
          yield* TestClock.adjust("100 millis")
        }
        // The failure itself must be recorded: the reactor re-sends its outcome until the store takes it.
        yield* uncap
        for (let i = 0; i < 60; i++) {
          if (yield* rowIs("job:s", (r) => r.status === "failed")) break
          yield* TestClock.adjust("1 second")
          yield* settle
        }
        const row = yield* Outbox.find("job:s")
        assert.strictEqual(row!.status, "failed")
        const error = row!.error as { reason: string; code: string }
        assert.deepStrictEqual([error.reason, error.code], ["storage", "SQLITE_FULL"])
        assert.deepStrictEqual(yield* chunksOf("job:s"), [])
      }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
    }
  )
})
