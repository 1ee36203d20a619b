import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Engine } from "../src/index.js"
import * as TestStore from "../src/testing/TestStore.js"
import { stackOverStore } from "./fixtures/reactors.js"
import { Reminder } from "./fixtures/Reminders.js"

describe("timer lateness on the real clock", () => {
  // The target is p99 < 50 ms on an idle server; the bound here is looser because this machine is shared.
  it.scopedLive("timers fire within a few milliseconds of their time (sleep to the due time, no polling)", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const start = Date.now() + 200
      const count = 40
      for (let i = 0; i < count; i++) {
        yield* engine.dispatchWithReceipt({
          commandId: `s-${i}`,
          type: "reminder.set",
          ownerId: `o-${i % 4}`,
          timerId: `t${i}`,
          at: start + i * 25
        })
      }
      yield* Effect.sleep(`${200 + count * 25 + 300} millis`)
      const events = (yield* engine.readEvents()).filter((e) => e.type === "reminder.fired")
      assert.strictEqual(events.length, count)
      const lateness = events
        .map((e) => e.occurredAt - (start + Number((e.payload as { timerId: string }).timerId.slice(1)) * 25))
        .sort((a, b) => a - b)
      const p99 = lateness[Math.ceil(lateness.length * 0.99) - 1]!
      console.log(`timer lateness ms: min ${lateness[0]} median ${lateness[count >> 1]} p99 ${p99}`)
      assert.isAtLeast(lateness[0]!, 0)
      assert.isBelow(p99, 250)
    }).pipe(
      Effect.provide(
        stackOverStore([], { engine: { aggregates: [Reminder], projections: [] } }).pipe(
          Layer.provideMerge(TestStore.layer({ filename: ":memory:" }))
        )
      )
    )
  )
})
