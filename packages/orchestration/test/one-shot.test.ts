/**
 * OneShot, the answer a command's callers and a performance wait on: the first result wins, every
 * waiter (before or after it) gets that result, and an interrupted waiter leaves without taking it
 * from the others.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { OneShot } from "../src/OneShot.js"

const settle = Effect.repeatN(Effect.yieldNow(), 10)

describe("OneShot", () => {
  it.effect("every waiter gets the first result; a later one changes nothing", () =>
    Effect.gen(function* () {
      const answer = new OneShot<number, string>()
      const early = yield* Effect.fork(answer.await)
      const early2 = yield* Effect.fork(Effect.exit(answer.await))
      yield* settle
      assert.isNull(early.unsafePoll())
      assert.isTrue(answer.complete(Exit.succeed(1)))
      assert.isFalse(answer.complete(Exit.fail("late")))
      assert.strictEqual(yield* Fiber.join(early), 1)
      assert.deepStrictEqual(yield* Fiber.join(early2), Exit.succeed(1))
      assert.strictEqual(yield* answer.await, 1)
      assert.isTrue(answer.isDone)
    })
  )

  it.effect("a failure reaches its waiters as the failure", () =>
    Effect.gen(function* () {
      const answer = new OneShot<number, string>()
      const waiter = yield* Effect.fork(Effect.exit(answer.await))
      yield* settle
      answer.complete(Exit.fail("refused"))
      assert.deepStrictEqual(yield* Fiber.join(waiter), Exit.fail("refused"))
    })
  )

  it.effect("an interrupted waiter leaves; the others still get the result", () =>
    Effect.gen(function* () {
      const answer = new OneShot<string>()
      const staying = yield* Effect.fork(answer.await)
      const leaving = yield* Effect.fork(answer.await)
      yield* settle
      yield* Fiber.interrupt(leaving)
      answer.complete(Exit.succeed("done"))
      yield* settle
      assert.isNotNull(staying.unsafePoll(), "the waiter that stayed was not woken")
      assert.strictEqual(yield* Fiber.join(staying), "done")
      const left = yield* Fiber.await(leaving)
      assert.isTrue(Exit.isInterrupted(left))
    })
  )
})
