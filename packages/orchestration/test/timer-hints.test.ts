/**
 * The timer loop wakes on the engine's timer hint (TimerLoop.commitSignal), which only a commit that
 * schedules or cancels a timer rings (and any commit of another process): on the PostgreSQL end-to-end
 * bench, waking on every commit cost a due-time read per batch (issue 20). SQLite only: PostgreSQL's
 * listener rings every hint once whenever it (re)opens, at a moment this test does not control.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Ref, Stream } from "effect"
import { Engine } from "../src/index.js"
import * as TestStore from "../src/testing/TestStore.js"
import { settle, stackOverStore } from "./fixtures/reactors.js"
import { Reminder } from "./fixtures/Reminders.js"

const stack = () =>
  stackOverStore([], { engine: { aggregates: [Reminder], projections: [] } }).pipe(
    Layer.provideMerge(TestStore.layer({ filename: ":memory:" }))
  )

const set = (commandId: string, timerId: string, at: number) => ({
  commandId,
  type: "reminder.set",
  ownerId: "o-1",
  timerId,
  at
})

describe("the timer hint", () => {
  it.scoped("only a commit that schedules or cancels a timer wakes the timer loop", () =>
    Effect.gen(function* () {
      const e = yield* Engine.Engine
      const hints = yield* Ref.make(0)
      // given a subscriber to the hint the timer loop waits on (TimerLoop.commitSignal)
      const changes = yield* e.timerChanges
      yield* Effect.forkScoped(Stream.runForEach(changes, () => Ref.update(hints, (n) => n + 1)))
      // when commands that write no timer commit, then nothing rings
      for (const id of ["f-1", "f-2", "f-3"])
        yield* e.dispatchWithReceipt({ commandId: id, type: "reminder.fire", ownerId: "o-1", timerId: "t0" })
      yield* settle
      assert.strictEqual(yield* Ref.get(hints), 0)
      // when a command schedules a timer, then it rings; and so does one that cancels it
      yield* e.dispatchWithReceipt(set("s-1", "t1", 5_000))
      yield* settle
      assert.isAtLeast(yield* Ref.getAndSet(hints, 0), 1)
      yield* e.dispatchWithReceipt({ commandId: "c-1", type: "reminder.cancel", ownerId: "o-1", timerId: "t1" })
      yield* settle
      assert.isAtLeast(yield* Ref.get(hints), 1)
    }).pipe(Effect.provide(stack()))
  )
})
