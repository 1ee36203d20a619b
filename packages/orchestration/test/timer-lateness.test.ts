/**
 * The timer loop sleeps exactly until the next due time (TimerLoop.ts): no polling period decides when
 * a timer fires. On the TestClock that is exact: every timer of a dense schedule fires at its own
 * millisecond, none a millisecond before, in order. How late fires are on a real, loaded machine is a
 * speed question, measured by the benchmarks, not asserted here.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import { Engine } from "../src/index.js"
import * as TestStore from "../src/testing/TestStore.js"
import { eventually, settle, stackOverStore } from "./fixtures/reactors.js"
import { Reminder } from "./fixtures/Reminders.js"

const start = 1_000
const spacing = 25
const count = 40
const dueAt = (i: number) => start + i * spacing

/** The fires so far, in log order: which timer, when it was due, and when the fire was recorded. */
const fires = Effect.gen(function* () {
  const engine = yield* Engine.Engine
  return (yield* engine.readEvents())
    .filter((e) => e.type === "reminder.fired")
    .map((e) => {
      const payload = e.payload as { timerId: string; at: number }
      return { timerId: payload.timerId, at: payload.at, recordedAt: e.occurredAt }
    })
})

describe("timer lateness under TestClock", () => {
  it.effect("each of 40 timers 25 ms apart, over 4 owners, fires at its own millisecond, not one before", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      for (let i = 0; i < count; i++) {
        yield* engine.dispatchWithReceipt({
          commandId: `s-${i}`,
          type: "reminder.set",
          ownerId: `o-${i % 4}`,
          timerId: `t${i}`,
          at: dueAt(i)
        })
      }
      for (let i = 0; i < count; i++) {
        // One millisecond short of its time: nothing new has fired.
        yield* TestClock.setTime(dueAt(i) - 1)
        yield* settle
        assert.strictEqual((yield* fires).length, i, `t${i} fired before ${dueAt(i)}`)
        // At its time it fires, with no later clock movement: the loop slept exactly until now.
        yield* TestClock.setTime(dueAt(i))
        yield* eventually(
          Effect.map(fires, (f) => f.length === i + 1),
          `t${i} fired at ${dueAt(i)}`
        )
        assert.deepStrictEqual((yield* fires)[i], { timerId: `t${i}`, at: dueAt(i), recordedAt: dueAt(i) })
      }
    }).pipe(
      Effect.provide(
        stackOverStore([], { engine: { aggregates: [Reminder], projections: [] } }).pipe(
          Layer.provideMerge(TestStore.layer({ filename: ":memory:" }))
        )
      )
    )
  )
})
