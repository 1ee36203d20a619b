import { assert, describe, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Layer, Option } from "effect"
import {
  EffectActionRefused,
  EffectFailure,
  EffectOutcomes,
  Engine,
  EngineUnavailable,
  FreeSpace
} from "../src/index.js"
import * as Outbox from "../src/Outbox.js"
import { jobStatus, submit } from "./fixtures/Jobs.js"
import { eventually, gated, scriptedHandler, stack, testReactor } from "./fixtures/reactors.js"

const operator = (action: "retry" | "cancel", effectId: string, jobId: string, attempt: number) => ({
  type: `effect.${action}`,
  commandId: EffectOutcomes.operatorId(action, effectId, attempt, 0),
  effectId,
  attempt,
  aggregateType: "job",
  aggregateId: jobId,
  by: "operator"
})

describe("operator actions", () => {
  it.effect(
    "retry sends a failed effect back to be performed; a second retry with the same id is answered from its receipt",
    () => {
      const handler = scriptedHandler()
      handler.behaviors.set("job:j1", (row) =>
        row.attempts === 1 ? Effect.fail(new EffectFailure({ message: "no", retryable: false })) : Effect.succeed("yes")
      )
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
        yield* eventually(
          Effect.map(Outbox.find("job:j1"), (r) => r?.status === "failed"),
          "failed"
        )
        const retried = yield* engine.dispatchWithReceipt(operator("retry", "job:j1", "j1", 1), { origin: "internal" })
        yield* eventually(
          Effect.map(Outbox.find("job:j1"), (r) => r?.status === "succeeded"),
          "performed again"
        )
        assert.deepStrictEqual(handler.performed, ["job:j1#1", "job:j1#2"])
        const again = yield* engine.dispatchWithReceipt(operator("retry", "job:j1", "j1", 1), { origin: "internal" })
        assert.deepStrictEqual(again, { ...retried, duplicate: true })
        assert.deepStrictEqual(yield* jobStatus("job:j1"), { status: "succeeded", detail: '"yes"' })
        // Retrying a succeeded effect is refused and changes nothing.
        const refused = yield* Effect.flip(
          engine.dispatchWithReceipt(operator("retry", "job:j1", "j1", 2), { origin: "internal" })
        )
        assert.instanceOf(refused, EffectActionRefused)
        assert.strictEqual((refused as EffectActionRefused).reason, "not-retryable")
        assert.include(refused.message, "only failed or cancelled")
      }).pipe(Effect.provide(stack([testReactor(handler.handle)])))
    }
  )

  it.effect("cancel stops a pending effect from running and the aggregate hears it", () => {
    const handler = scriptedHandler()
    const first = gated()
    handler.behaviors.set("job:j1:0", first.behavior)
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("j1", "work.safe", { count: 2 }))
      yield* eventually(
        Effect.map(Outbox.find("job:j1:0"), (r) => r?.status === "running"),
        "first running"
      )
      // The second row of the lane waits behind the first: cancel it while pending.
      yield* engine.dispatchWithReceipt(operator("cancel", "job:j1:1", "j1", 0), { origin: "internal" })
      yield* first.open
      yield* eventually(
        Effect.map(Outbox.find("job:j1:0"), (r) => r?.status === "succeeded"),
        "first done"
      )
      assert.strictEqual((yield* Outbox.find("job:j1:1"))!.status, "cancelled")
      assert.deepStrictEqual(handler.performed, ["job:j1:0#1"])
      assert.deepStrictEqual(yield* jobStatus("job:j1:1"), { status: "cancelled", detail: "cancelled by an operator" })
    }).pipe(Effect.provide(stack([testReactor(handler.handle)])))
  })
})

describe("the disk floor at the front door", () => {
  it.effect(
    "below the floor new client work is refused, internal commands still land; service resumes when space returns",
    () => {
      const probe = FreeSpace.controllable(1_000, 10)
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const refused = yield* Effect.flip(engine.dispatchWithReceipt(submit("j1", "work.safe")))
        assert.instanceOf(refused, EngineUnavailable)
        assert.strictEqual((refused as EngineUnavailable).reason, "storage-below-floor")
        const internal = yield* engine.dispatchWithReceipt(submit("j2", "work.none"), { origin: "internal" })
        assert.strictEqual(internal.duplicate, false)
        probe.state.free = 5_000
        const accepted = yield* engine.dispatchWithReceipt(submit("j1", "work.none"))
        assert.strictEqual(accepted.duplicate, false)
      }).pipe(Effect.provide(stack([]).pipe(Layer.provide(probe.layer))))
    }
  )

  it.effect(
    "below the floor a client command that would write is refused, a rejection too; a replay of a committed one is answered from its receipt",
    () => {
      const probe = FreeSpace.controllable(1_000, 5_000)
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const sql = yield* SqlClient
        const receipts = Effect.map(sql<{ n: number }>`SELECT COUNT(*) AS n FROM receipts`, (rows) =>
          Number(rows[0]!.n)
        )
        const first = yield* engine.dispatchWithReceipt(submit("j1", "work.none"))
        probe.state.free = 10
        const before = yield* receipts
        // A replay writes nothing: it is answered from the receipt, below the floor as above it.
        const replay = yield* engine.dispatchWithReceipt(submit("j1", "work.none"))
        assert.deepStrictEqual(replay, { ...first, duplicate: true })
        // Submitting j1 again under a new id would be rejected, and a rejection is a stored receipt: a write.
        const again = yield* Effect.flip(
          engine.dispatchWithReceipt({ ...submit("j1", "work.none"), commandId: "submit-j1-again" })
        )
        assert.instanceOf(again, EngineUnavailable)
        assert.strictEqual((again as EngineUnavailable).reason, "storage-below-floor")
        assert.strictEqual(yield* receipts, before)
        assert.isTrue(Option.isNone(yield* engine.receipt("submit-j1-again")))
      }).pipe(Effect.provide(stack([]).pipe(Layer.provide(probe.layer))))
    }
  )
})
