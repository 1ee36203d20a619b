/**
 * The queue between the front door and the processor: commands offered while the processor waits
 * on an empty queue all land in the batch it wakes with (group commit), not one now and the rest
 * after the next commit.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import * as CommandQueue from "../src/CommandQueue.js"
import type { QueuedCommand } from "../src/Processor.js"

const command = (n: number) =>
  ({
    identity: {
      commandId: `c-${n}`,
      aggregateType: "a",
      aggregateId: `a-${n}`,
      commandType: "t",
      fingerprint: `f-${n}`
    },
    // Never decided here: only the queue is under test.
    aggregate: undefined as never,
    decide: () => Effect.dieMessage("not decided in this test"),
    settles: false
  }) satisfies QueuedCommand

describe("CommandQueue", () => {
  it.effect("commands offered in one step while the taker waits on an empty queue come in one batch", () =>
    Effect.gen(function* () {
      const queue = yield* CommandQueue.make(100, () => false)
      const taker = yield* Effect.fork(queue.takeBatch(64))
      yield* Effect.yieldNow()
      // Three dispatchers queue in the same step (the flushers of one flush window do).
      const dispatchers = yield* Effect.forEach([1, 2, 3], (n) => Effect.fork(queue.enqueue(command(n))))
      const batch = yield* Fiber.join(taker)
      assert.deepStrictEqual(
        batch.map((item) => item.identity.commandId),
        ["c-1", "c-2", "c-3"]
      )
      yield* Effect.forEach(dispatchers, Fiber.interrupt)
    })
  )

  it.effect("a batch holds at most max commands; the rest wait for the next", () =>
    Effect.gen(function* () {
      const queue = yield* CommandQueue.make(100, () => false)
      const dispatchers = yield* Effect.forEach([1, 2, 3], (n) => Effect.fork(queue.enqueue(command(n))))
      yield* Effect.yieldNow()
      assert.strictEqual((yield* queue.takeBatch(2)).length, 2)
      assert.strictEqual((yield* queue.takeBatch(2)).length, 1)
      yield* Effect.forEach(dispatchers, Fiber.interrupt)
    })
  )
})
