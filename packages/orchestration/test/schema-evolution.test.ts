import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { Aggregate, CommandDefect, Decision, Engine, Projection } from "../src/index.js"
import * as TestStore from "../src/testing/TestStore.js"
import { tempDbFile } from "./fixtures/harness.js"

/** Version 1 of a counter stored `{ by }`; version 2 renamed it to `{ amount }`. */
type Added = { readonly type: "counter.added"; readonly amount: number }
const eventsV1 = Aggregate.event("counter.added", { by: Schema.Number }) as unknown as Schema.Schema<Added>
const eventsV2: Schema.Schema<Added> = Aggregate.event("counter.added", { amount: Schema.Number })

const counterV = (version: 1 | 2) =>
  Aggregate.make({
    name: "counter",
    commands: { "counter.add": Aggregate.command("counter.add", { counterId: Schema.String, n: Schema.Number }) },
    events: version === 1 ? eventsV1 : eventsV2,
    aggregateId: (c) => c.counterId,
    initialState: 0,
    evolve: (total: number, e: Added) => total + (e.amount ?? (e as unknown as { by: number }).by),
    decide: (total, command) =>
      total + command.n > 10
        ? Decision.reject("too-big")
        : Decision.of<Added>({
            events: [
              version === 1
                ? ({ type: "counter.added", by: command.n } as never)
                : { type: "counter.added", amount: command.n }
            ]
          }),
    eventSchemaVersion: version,
    upcast: (stored) =>
      stored.schemaVersion === 1 ? { type: stored.type, amount: (stored.payload as { by: number }).by } : stored.payload
  })

const engineOver = (
  file: string,
  aggregate: Aggregate.AnyAggregate,
  projections: ReadonlyArray<Projection.Projection> = []
) =>
  Engine.layer({ aggregates: [aggregate], projections }).pipe(Layer.provideMerge(TestStore.layer({ filename: file })))

describe("schema versions", () => {
  it.effect("events of an older schema version are upcast on replay", () => {
    const file = tempDbFile()
    const v1 = Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt({ commandId: "a1", type: "counter.add", counterId: "c", n: 4 })
      yield* engine.dispatchWithReceipt({ commandId: "a2", type: "counter.add", counterId: "c", n: 5 })
    }).pipe(Effect.provide(engineOver(file, counterV(1))))
    const v2 = Effect.gen(function* () {
      const engine = yield* Engine.Engine
      // State 9 was rebuilt through the upcast: 2 more would exceed 10.
      const refused = yield* Effect.flip(
        engine.dispatchWithReceipt({ commandId: "a3", type: "counter.add", counterId: "c", n: 2 })
      )
      assert.strictEqual(refused._tag, "CommandRejected")
      const ok = yield* engine.dispatchWithReceipt({ commandId: "a4", type: "counter.add", counterId: "c", n: 1 })
      assert.strictEqual(ok.events[0]!.schemaVersion, 2)
      const [first] = yield* engine.readEvents({ limit: 1 })
      assert.deepStrictEqual(yield* engine.decode(first!), { type: "counter.added", amount: 4 })
    }).pipe(Effect.provide(engineOver(file, counterV(2))))
    return Effect.zipRight(v1, v2)
  })
})

describe("projection defects", () => {
  it.effect(
    "a projection that throws fails its command with CommandDefect; nothing of it commits; others are served",
    () => {
      const counter = counterV(2)
      const fragile = Projection.make(counter, {
        name: "fragile",
        setup: Effect.void,
        reset: Effect.void,
        apply: (event) => {
          if (event.amount === 7) throw new Error("projection bug")
          return Effect.void
        }
      })
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const sql = yield* SqlClient
        const error = yield* Effect.flip(
          engine.dispatchWithReceipt({ commandId: "bad", type: "counter.add", counterId: "c", n: 7 })
        )
        assert.instanceOf(error, CommandDefect)
        assert.strictEqual((error as CommandDefect).stage, "projection")
        const [events] = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM events`
        assert.strictEqual(Number(events!.n), 0)
        const ok = yield* engine.dispatchWithReceipt({ commandId: "good", type: "counter.add", counterId: "c", n: 3 })
        assert.strictEqual(ok.events[0]!.version, 1)
      }).pipe(Effect.provide(engineOver(":memory:", counter, [fragile])))
    }
  )
})
