/**
 * Aggregate hints: a commit rings the readers of the aggregates it changed and no one else, so a
 * thread's SSE stream is not woken by every other thread's chunks; a foreign commit rings them all.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Queue } from "effect"
import * as CommitHints from "../src/CommitHints.js"

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
})
