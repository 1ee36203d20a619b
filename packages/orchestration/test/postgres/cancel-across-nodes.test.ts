/**
 * A cancel committed by one node reaches the handler another node is running within a second: the
 * commit's NOTIFY wakes the performer's watch (CancelWatch), long before its next lease renewal.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Boot, Engine } from "../../src/index.js"
import * as Outbox from "../../src/Outbox.js"
import * as TestStore from "../../src/testing/TestStore.js"
import { jobsConfig, submit } from "../fixtures/Jobs.js"
import { tempDbFile } from "../fixtures/harness.js"
import { eventually, scriptedHandler, testReactor } from "../fixtures/reactors.js"
import { wait } from "./sessions.js"

describe("a cancel across nodes", () => {
  it.scopedLive("node B's cancel of a row node A performs stops A's handler within a second", () =>
    Effect.gen(function* () {
      const file = tempDbFile()
      const performer = scriptedHandler()
      let interruptedAt: number | undefined
      performer.behaviors.set("job:j1", () =>
        Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => (interruptedAt = Date.now()))))
      )
      const node = (nodeId: string, reactors: ReadonlyArray<ReturnType<typeof testReactor>>) =>
        Boot.layer({ reactors, retention: false, worker: { nodeId } }).pipe(
          Layer.provideMerge(Engine.layer(jobsConfig)),
          Layer.provideMerge(TestStore.layer({ filename: file }))
        )
      // A's lease is renewed every 20 s: a stop within a second cannot come from a renewal.
      const engineA = yield* Effect.provide(
        Engine.Engine,
        yield* Layer.build(
          node("node-A", [testReactor(performer.handle, { lease: "60 seconds", shutdownGrace: "0 millis" })])
        )
      )
      const engineB = yield* Effect.provide(Engine.Engine, yield* Layer.build(node("node-B", [])))
      yield* engineA.dispatchWithReceipt(submit("j1", "work.bound"))
      const store = yield* Layer.build(TestStore.layer({ filename: file }))
      const row = () => Effect.provide(Outbox.find("job:j1"), store)
      yield* eventually(
        Effect.map(row(), (r) => r?.status === "running"),
        "node A runs j1"
      )
      const cancelledAt = Date.now()
      yield* engineB.dispatchWithReceipt(
        {
          type: "effect.cancel",
          commandId: "op-cancel-j1",
          effectId: "job:j1",
          aggregateType: "job",
          aggregateId: "j1",
          by: "operator"
        },
        { origin: "internal" }
      )
      for (let i = 0; i < 100 && interruptedAt === undefined; i++) yield* wait(20)
      assert.isDefined(interruptedAt, "node A's handler was never stopped")
      assert.isBelow(interruptedAt! - cancelledAt, 1_000)
      yield* eventually(
        Effect.map(row(), (r) => r?.leaseOwner === null),
        "node A acknowledged the stop"
      )
      const settled = (yield* row())!
      assert.strictEqual(settled.status, "cancelled")
      assert.strictEqual((settled.error as { code?: string }).code, "stopped-after-start")
      assert.deepStrictEqual(performer.performed, ["job:j1#1"])
    })
  )
})
