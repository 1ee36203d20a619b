/**
 * Readers and retention around a cancelled performance that is still stopping (found by a review on
 * 2026-12-05; each test failed before its fix): the text it flushes as it stops is followed and kept.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Exit, Fiber, Stream, TestClock } from "effect"
import { Engine, Retention, StreamChunks } from "../src/index.js"
import * as Outbox from "../src/Outbox.js"
import { tempDbFile } from "./fixtures/harness.js"
import { jobsEngine, submit } from "./fixtures/Jobs.js"
import { settle } from "./fixtures/reactors.js"

const chunk = (start: number, text: string) => ({
  type: "effect.stream",
  commandId: StreamChunks.chunkCommandId("job:s", 1, start, start + text.length),
  effectId: "job:s",
  aggregateType: "job",
  aggregateId: "s",
  attempt: 1,
  start,
  text
})

/** A job's effect performed by owner w (attempt 1), with the text "ab" recorded. */
const performingWithText = Effect.gen(function* () {
  const engine = yield* Engine.Engine
  yield* engine.activate
  yield* engine.dispatchWithReceipt(submit("s", "work.safe"))
  yield* Outbox.claim({ kinds: ["work.safe"], owner: "w", now: 0, leaseMs: 30_000, limit: 1, after: 0 })
  yield* engine.dispatchWithReceipt(chunk(0, "ab"), { origin: "internal" })
  return engine
})

/** The job cancels its running effect: the row is cancelled and keeps its lease until the performer stops. */
const cancel = (engine: Engine.EngineShape) =>
  engine.dispatchWithReceipt({ commandId: "cancel-s", type: "job.cancel", jobId: "s", effectIds: ["job:s"] })

describe("followStreamChunks and a cancelled performance's stopping tail", () => {
  it.effect("a follower delivers every chunk the table accepts, including the text flushed after a cancel", () =>
    Effect.gen(function* () {
      const engine = yield* performingWithText
      const follower = yield* Effect.fork(Stream.runCollect(engine.followStreamChunks("job:s")))
      yield* settle
      yield* cancel(engine)
      yield* settle
      // The performer flushes the text it had buffered as it stops: the table takes it (decideChunk's stopping rule).
      const late = yield* engine.dispatchWithReceipt(chunk(2, "cd"), { origin: "internal" })
      assert.strictEqual(late.status, "accepted")
      // The performer says it stopped (lease cleared): no more chunks can come.
      yield* Outbox.acknowledgeStopped("job:s", 1, "w")
      yield* engine.ringAggregate("job", "s")
      yield* settle
      const stored = (yield* engine.readStreamChunks("job:s", { limit: 100 })).map((c) => c.text)
      assert.deepStrictEqual(stored, ["ab", "cd"])
      const followed = Chunk.toReadonlyArray(yield* Fiber.join(follower)).map((c) => c.text)
      // The follower's contract: "ends once the effect is settled and every chunk was delivered".
      assert.deepStrictEqual(followed, ["ab", "cd"])
    }).pipe(Effect.provide(jobsEngine(tempDbFile())))
  )
})

describe("retention and a cancelled performance that has not stopped yet", () => {
  it.effect("chunks of a cancelled row are kept while its performer's lease is live, and compacted after it", () =>
    Effect.gen(function* () {
      const engine = yield* performingWithText
      yield* cancel(engine)
      // A round past the streams period while the performer is still stopping under its lease.
      yield* TestClock.adjust("2 seconds")
      const during = yield* Retention.pruneOnce({ settledStreams: "1 second" })
      // It flushes what it had as it stops: the table takes it, after "ab".
      const late = yield* Effect.exit(engine.dispatchWithReceipt(chunk(2, "cd"), { origin: "internal" }))
      const stored = (yield* engine.readStreamChunks("job:s", { limit: 100 })).map((c) => c.text)
      assert.deepStrictEqual(
        {
          compacted: during.streamChunks,
          late: Exit.isSuccess(late) ? "accepted" : String(Exit.causeOption(late)),
          stored
        },
        { compacted: 0, late: "accepted", stored: ["ab", "cd"] }
      )
      // Once the lease has ended no chunk of that performance can be taken on its word: compacted.
      yield* TestClock.adjust("1 minute")
      assert.strictEqual((yield* Retention.pruneOnce({ settledStreams: "1 second" })).streamChunks, 2)
    }).pipe(Effect.provide(jobsEngine(tempDbFile())))
  )
})
