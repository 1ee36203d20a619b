/**
 * The alarm a loop waits on beside its rings (Alarm.ts): one ring at the time last set, never before
 * it, none for a time replaced before it came, and an earlier time than the sleep in progress honoured.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Queue, TestClock } from "effect"
import * as Alarm from "../src/Alarm.js"

/** Lets the alarm's fiber run its steps at the current time. */
const settle = Effect.repeatN(Effect.yieldNow(), 20)

const setup = Effect.gen(function* () {
  const ring = yield* Queue.unbounded<void>()
  const alarm = yield* Alarm.make(ring)
  const rings = () => Queue.size(ring)
  return { alarm, rings }
})

describe("Alarm", () => {
  it.scoped("rings once at the time set, not before", () =>
    Effect.gen(function* () {
      const { alarm, rings } = yield* setup
      yield* alarm.set(1_000)
      yield* settle
      yield* TestClock.adjust(999)
      yield* settle
      assert.strictEqual(yield* rings(), 0)
      yield* TestClock.adjust(1)
      yield* settle
      assert.strictEqual(yield* rings(), 1)
      yield* TestClock.adjust(10_000)
      yield* settle
      assert.strictEqual(yield* rings(), 1)
    })
  )

  it.scoped("a later time replaces the one set: no ring at the first", () =>
    Effect.gen(function* () {
      const { alarm, rings } = yield* setup
      yield* alarm.set(100)
      yield* settle
      yield* alarm.set(500)
      yield* TestClock.adjust(100)
      yield* settle
      assert.strictEqual(yield* rings(), 0)
      yield* TestClock.adjust(399)
      yield* settle
      assert.strictEqual(yield* rings(), 0)
      yield* TestClock.adjust(1)
      yield* settle
      assert.strictEqual(yield* rings(), 1)
    })
  )

  it.scoped("an earlier time than the sleep in progress rings at the earlier time, and only then", () =>
    Effect.gen(function* () {
      const { alarm, rings } = yield* setup
      yield* alarm.set(1_000)
      yield* settle
      yield* alarm.set(50)
      yield* settle
      yield* TestClock.adjust(49)
      yield* settle
      assert.strictEqual(yield* rings(), 0)
      yield* TestClock.adjust(1)
      yield* settle
      assert.strictEqual(yield* rings(), 1)
      yield* TestClock.adjust(2_000)
      yield* settle
      assert.strictEqual(yield* rings(), 1)
    })
  )

  it.scoped("set again after it rang, it rings again", () =>
    Effect.gen(function* () {
      const { alarm, rings } = yield* setup
      yield* alarm.set(10)
      yield* settle
      yield* TestClock.adjust(10)
      yield* settle
      yield* alarm.set(30)
      yield* settle
      yield* TestClock.adjust(19)
      yield* settle
      assert.strictEqual(yield* rings(), 1)
      yield* TestClock.adjust(1)
      yield* settle
      assert.strictEqual(yield* rings(), 2)
    })
  )

  it.scoped("made in an uninterruptible region (a layer's build), an earlier time still replaces the timer", () =>
    Effect.gen(function* () {
      const ring = yield* Queue.unbounded<void>()
      const alarm = yield* Effect.uninterruptible(Alarm.make(ring))
      yield* alarm.set(1_000)
      yield* settle
      // The first timer sleeps until 1,000; the earlier time stops it, which must not wait for it.
      const setting = yield* Effect.fork(alarm.set(50))
      yield* settle
      yield* TestClock.adjust(50)
      yield* settle
      assert.isNotNull(setting.unsafePoll(), "setting an earlier time waited on the timer it replaces")
      assert.strictEqual(yield* Queue.size(ring), 1)
    })
  )
})
