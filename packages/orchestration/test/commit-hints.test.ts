/**
 * Aggregate hints: a commit rings the readers of the aggregates it changed and no one else, so a
 * thread's SSE stream is not woken by every other thread's chunks; a foreign commit rings them all.
 */
import { SqlError } from "@effect/sql/SqlError"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Option, Queue, Stream, TestClock } from "effect"
import * as CommitHints from "../src/CommitHints.js"
import { logLevels } from "./fixtures/logLevels.js"

describe("CommitHints per aggregate", () => {
  it.scoped("rings only the readers of the aggregates named; all of them on 'all'; none after their scope", () =>
    Effect.gen(function* () {
      const hints = yield* CommitHints.make
      const a = yield* hints.subscribeAggregate("thread", "a")
      const b = yield* hints.subscribeAggregate("thread", "b")
      yield* hints.ringAggregates([CommitHints.aggregateKey("thread", "a")])
      assert.isTrue(Option.isSome(yield* Queue.poll(a)))
      assert.isTrue(Option.isNone(yield* Queue.poll(b)))
      // Sliding: many rings before a read are one hint.
      yield* hints.ringAggregates([CommitHints.aggregateKey("thread", "b")])
      yield* hints.ringAggregates([CommitHints.aggregateKey("thread", "b")])
      assert.strictEqual(yield* Queue.size(b), 1)
      yield* Queue.poll(b)
      yield* hints.ringAggregates("all")
      assert.deepStrictEqual([yield* Queue.size(a), yield* Queue.size(b)], [1, 1])
    })
  )

  it.effect("a reader whose scope closed is no longer rung", () =>
    Effect.gen(function* () {
      const hints = yield* CommitHints.make
      const closed = yield* Effect.scoped(hints.subscribeAggregate("thread", "a"))
      yield* hints.ringAggregates([CommitHints.aggregateKey("thread", "a")])
      assert.isTrue(yield* Queue.isShutdown(closed))
    })
  )

  it.scoped("a follower learns whether the commits that rang it wrote its aggregate's events", () =>
    Effect.gen(function* () {
      const hints = yield* CommitHints.make
      const a = yield* hints.followAggregate("thread", "a")
      const b = yield* hints.followAggregate("thread", "b")
      // At first, events may be waiting (nothing was read yet); the flag resets once taken.
      assert.deepStrictEqual([a.takeEventsFlag(), a.takeEventsFlag()], [true, false])
      b.takeEventsFlag()
      const keyA = CommitHints.aggregateKey("thread", "a")
      const keyB = CommitHints.aggregateKey("thread", "b")
      // One commit: a's events, b's stream chunks only; both are woken.
      yield* hints.ringAggregates([keyA, keyB], new Set([keyA]))
      yield* a.changed
      yield* b.changed
      assert.deepStrictEqual([a.takeEventsFlag(), b.takeEventsFlag()], [true, false])
      // A chunk-only ring does not clear a flag still untaken; a foreign commit ("all") flags everyone.
      yield* hints.ringAggregates([keyA], new Set([keyA]))
      yield* hints.ringAggregates([keyA], new Set())
      assert.isTrue(a.takeEventsFlag())
      yield* hints.ringAggregates("all")
      assert.deepStrictEqual([a.takeEventsFlag(), b.takeEventsFlag()], [true, true])
    })
  )
})

describe("forwarding other processes' commit hints", () => {
  it.scoped(
    "a listener that dies or fails is logged and opened again a second later, and the foreign commits after it ring followers",
    () => {
      const { logged, layer: kept } = logLevels()
      return Effect.gen(function* () {
        const hints = yield* CommitHints.make
        const commits = yield* hints.subscribeCommits
        // Each open of the listener: the first dies (a bug in the driver), the second fails (the
        // session lost), the third is up and hears one foreign commit.
        const opens = [
          Stream.dieMessage("driver bug in LISTEN"),
          Stream.fail(new SqlError({ cause: new Error("gone"), message: "the LISTEN session was lost" })),
          Stream.concat(Stream.make(undefined), Stream.never)
        ]
        let opened = 0
        const foreign = Stream.suspend(() => opens[Math.min(opened++, opens.length - 1)]!)
        const forwarding = yield* Effect.fork(CommitHints.forwardForeign(hints, { value: 7 }, foreign))
        yield* TestClock.adjust("1 second")
        yield* TestClock.adjust("1 second")
        assert.strictEqual(opened, 3, "the listener was opened again after it died and after it failed")
        assert.deepStrictEqual(yield* Queue.poll(commits), Option.some(7))
        assert.deepStrictEqual(logged, ["ERROR", "WARN"])
        // Shutdown ends it.
        yield* Fiber.interrupt(forwarding)
        assert.isTrue(Exit.isInterrupted(yield* Fiber.await(forwarding)))
      }).pipe(Effect.provide(kept))
    }
  )

  it.effect("a store without other processes (an empty stream) ends the forwarding at once", () =>
    Effect.gen(function* () {
      const hints = yield* CommitHints.make
      yield* CommitHints.forwardForeign(hints, { value: 0 }, Stream.empty)
    })
  )
})
