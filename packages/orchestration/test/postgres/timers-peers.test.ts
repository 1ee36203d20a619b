/**
 * Two engines on one PostgreSQL schema, each with its own pool and timer loop: a due timer fires once
 * (claims use FOR UPDATE SKIP LOCKED and a lease; a second fire would be a duplicate receipt).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Boot, Engine, Timers } from "../../src/index.js"
import * as TestStore from "../../src/testing/TestStore.js"
import { tempDbFile } from "../fixtures/harness.js"
import { eventually } from "../fixtures/reactors.js"
import { Reminder } from "../fixtures/Reminders.js"

const node = (file: string, name: string) =>
  Boot.layer<never>({
    reactors: [],
    retention: false,
    worker: { ownerId: `owner-${name}`, nodeId: `node-${name}` }
  }).pipe(
    Layer.provideMerge(Engine.layer({ aggregates: [Reminder], activation: "manual" })),
    Layer.provideMerge(TestStore.layer({ filename: file }))
  )

describe("timers on a shared store", () => {
  it.scopedLive("two engines, one due timer: it fires once", () =>
    Effect.gen(function* () {
      const file = tempDbFile()
      const a = yield* Layer.build(node(file, "A"))
      const b = yield* Layer.build(node(file, "B"))
      const engineA = yield* Effect.provide(Engine.Engine, a)
      const engineB = yield* Effect.provide(Engine.Engine, b)
      const at = Date.now() + 400
      for (const [i, owner] of ["o-1", "o-2", "o-3"].entries()) {
        const engine = i % 2 === 0 ? engineA : engineB
        yield* engine.dispatchWithReceipt({
          commandId: `s-${owner}`,
          type: "reminder.set",
          ownerId: owner,
          timerId: "t",
          at
        })
      }
      const firedOf = (engine: Engine.EngineShape) =>
        Effect.map(engine.readEvents(), (events) => events.filter((e) => e.type === "reminder.fired"))
      yield* eventually(
        Effect.map(firedOf(engineA), (f) => f.length === 3),
        "three fired"
      )
      // Both loops have had time to try again; nothing fires twice.
      yield* Effect.sleep("1 second")
      const fired = yield* firedOf(engineB)
      assert.deepStrictEqual(fired.map((e) => e.aggregateId).sort(), ["o-1", "o-2", "o-3"])
      for (const owner of ["o-1", "o-2", "o-3"]) {
        const rows = yield* Effect.provide(Timers.ofAggregate("reminder", owner), a)
        assert.strictEqual(rows[0]!.status, "fired")
      }
    })
  )
})
