import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit } from "effect"
import { EffectFailure, Engine } from "../src/index.js"
import * as Outbox from "../src/Outbox.js"
import { submit } from "./fixtures/Jobs.js"
import { eventually, gated, scriptedHandler, settle, stack, testReactor } from "./fixtures/reactors.js"

/** An operator's command, aimed at the attempt the operator saw. */
const operator = (action: "retry" | "cancel", commandId: string, effectId: string, jobId: string, attempt = 1) => ({
  type: `effect.${action}`,
  commandId,
  effectId,
  attempt,
  aggregateType: "job",
  aggregateId: jobId,
  by: "operator"
})

/** The handlers below never end by themselves: shutdown interrupts them at once instead of waiting a grace. */
const neverEnding = { shutdownGrace: "0 millis" } as const

const statusOf = (effectId: string) => Effect.map(Outbox.find(effectId), (row) => row?.status)

describe("operator retry and cancel are safely repeatable", () => {
  it.effect(
    "a retry refused while the effect runs does not occupy its id: the same retry after the row failed is performed",
    () => {
      const handler = scriptedHandler()
      const first = gated()
      handler.behaviors.set("job:j1", (row) =>
        row.attempts === 1
          ? first
              .behavior(row)
              .pipe(Effect.zipRight(Effect.fail(new EffectFailure({ message: "no", retryable: false }))))
          : Effect.succeed("yes")
      )
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
        yield* eventually(
          Effect.map(statusOf("job:j1"), (s) => s === "running"),
          "running"
        )
        const early = yield* Effect.exit(
          engine.dispatchWithReceipt(operator("retry", "op-retry-1", "job:j1", "j1"), { origin: "internal" })
        )
        assert.isTrue(Exit.isFailure(early), "a retry of a running effect is refused")
        yield* first.open
        yield* eventually(
          Effect.map(statusOf("job:j1"), (s) => s === "failed"),
          "failed"
        )
        const retried = yield* engine.dispatchWithReceipt(operator("retry", "op-retry-1", "job:j1", "j1"), {
          origin: "internal"
        })
        assert.strictEqual(retried.duplicate, false)
        yield* eventually(
          Effect.map(statusOf("job:j1"), (s) => s === "succeeded"),
          "performed again"
        )
        assert.deepStrictEqual(handler.performed, ["job:j1#1", "job:j1#2"])
        // The applied retry owns its id: sent again, it is answered from its receipt, whatever the row did since.
        const again = yield* engine.dispatchWithReceipt(operator("retry", "op-retry-1", "job:j1", "j1"), {
          origin: "internal"
        })
        assert.deepStrictEqual(again, { ...retried, duplicate: true })
        const refused = yield* Effect.flip(
          engine.dispatchWithReceipt(operator("retry", "op-retry-2", "job:j1", "j1", 2), { origin: "internal" })
        )
        assert.strictEqual(refused._tag, "EffectActionRefused")
        assert.strictEqual((refused as { reason?: string }).reason, "not-retryable")
      }).pipe(Effect.provide(stack([testReactor(handler.handle)])))
    }
  )

  it.effect(
    "cancel then retry of a running effect: the retry is refused until the cancelled performance stopped, so two never run at once",
    () => {
      const handler = scriptedHandler()
      const release = Effect.runSync(Deferred.make<void>())
      // The first performance never finishes by itself and, told to stop, takes a while to let go (as a
      // process given SIGTERM does); the second one answers.
      handler.behaviors.set("job:j1", (row) =>
        row.attempts === 1
          ? Effect.never.pipe(Effect.onInterrupt(() => Deferred.await(release)))
          : Effect.succeed("second")
      )
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
        yield* eventually(
          Effect.map(statusOf("job:j1"), (s) => s === "running"),
          "running"
        )
        yield* engine.dispatchWithReceipt(operator("cancel", "op-cancel-1", "job:j1", "j1"), { origin: "internal" })
        assert.strictEqual(yield* statusOf("job:j1"), "cancelled")
        const early = yield* Effect.exit(
          engine.dispatchWithReceipt(operator("retry", "op-retry-1", "job:j1", "j1"), { origin: "internal" })
        )
        assert.isTrue(Exit.isFailure(early), "a retry while the cancelled performance may still run is refused")
        // The row still names who may be performing it: its owner has not stopped yet.
        assert.strictEqual((yield* Outbox.find("job:j1"))!.leaseOwner, "owner-A")
        yield* settle
        assert.deepStrictEqual(handler.performed, ["job:j1#1"])
        if (Exit.isFailure(early)) {
          const error = early.cause._tag === "Fail" ? early.cause.error : undefined
          assert.strictEqual(error?._tag, "EffectActionRefused")
          assert.strictEqual((error as { reason?: string }).reason, "performance-may-be-running")
        }
        // The owner saw the cancel at once (CancelWatch); once its handler let go, it says so.
        yield* Deferred.succeed(release, undefined)
        yield* eventually(
          Effect.map(Outbox.find("job:j1"), (row) => row?.leaseOwner === null),
          "the owner acknowledged the stop"
        )
        assert.strictEqual(handler.running(), 0)
        const retried = yield* engine.dispatchWithReceipt(operator("retry", "op-retry-1", "job:j1", "j1"), {
          origin: "internal"
        })
        assert.strictEqual(retried.duplicate, false)
        yield* eventually(
          Effect.map(statusOf("job:j1"), (s) => s === "succeeded"),
          "performed again"
        )
        assert.deepStrictEqual(handler.performed, ["job:j1#1", "job:j1#2"])
        assert.strictEqual(handler.maxRunning(), 1)
      }).pipe(Effect.provide(stack([testReactor(handler.handle, neverEnding)])))
    }
  )

  it.effect(
    "a process-bound effect failed by process loss is never retried by an operator: it may have taken effect",
    () => {
      const handler = scriptedHandler()
      handler.behaviors.set("job:j1", () => Effect.never)
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(submit("j1", "work.bound"))
        yield* eventually(
          Effect.map(statusOf("job:j1"), (s) => s === "running"),
          "running"
        )
        // What boot reconcile dispatches for a process-bound row its dead owner left running.
        yield* engine.dispatchWithReceipt(
          {
            type: "effect.fail",
            commandId: "reconcile:job:j1#1",
            effectId: "job:j1",
            attempt: 1,
            aggregateType: "job",
            aggregateId: "j1",
            by: "reconcile",
            error: { message: "server process ended before the effect completed", code: "process-ended" }
          },
          { origin: "internal" }
        )
        assert.strictEqual(yield* statusOf("job:j1"), "failed")
        const refused = yield* Effect.exit(
          engine.dispatchWithReceipt(operator("retry", "op-retry-1", "job:j1", "j1"), { origin: "internal" })
        )
        assert.isTrue(Exit.isFailure(refused), "the retry is refused")
        if (Exit.isFailure(refused)) {
          const error = refused.cause._tag === "Fail" ? refused.cause.error : undefined
          assert.strictEqual(error?._tag, "EffectActionRefused")
          assert.strictEqual((error as { reason?: string }).reason, "may-have-taken-effect")
        }
        // A row failed before failures carried a reason holds only its message and code: its
        // reason is read from the code, and the retry is refused all the same.
        const sql = yield* SqlClient
        const legacy = JSON.stringify({
          message: "server process ended before the effect completed",
          code: "process-ended"
        })
        yield* sql`UPDATE outbox SET error = ${legacy} WHERE effect_id = 'job:j1'`
        const refusedLegacy = yield* Effect.flip(
          engine.dispatchWithReceipt(operator("retry", "op-retry-2", "job:j1", "j1"), { origin: "internal" })
        )
        assert.strictEqual((refusedLegacy as { reason?: string }).reason, "may-have-taken-effect")
        yield* settle
        assert.strictEqual(yield* statusOf("job:j1"), "failed")
        assert.deepStrictEqual(handler.performed, ["job:j1#1"])
      }).pipe(Effect.provide(stack([testReactor(handler.handle, neverEnding)])))
    }
  )
})
