/**
 * Found by a review (2026-12-05; failed before its fix): retention's DELETE picks settled rows in a
 * subquery and deletes by sequence. On PostgreSQL (READ COMMITTED) a row the subquery saw settled,
 * then made pending by an operator's retry that commits while the DELETE waits for its lock, was
 * deleted anyway: the outer WHERE did not check it again. The retry was accepted, the row gone.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, TestClock } from "effect"
import { Retention } from "../../src/index.js"
import * as Outbox from "../../src/Outbox.js"
import * as TestStore from "../../src/testing/TestStore.js"
import { submit } from "../fixtures/Jobs.js"
import { blockedBehind, engineHeldAt } from "./sessions.js"

describe("retention racing an operator retry (shared store)", () => {
  it.scoped("a failed row retried to pending while retention's round runs is never deleted", () =>
    Effect.gen(function* () {
      const { file, sql, hold, engine, inStore } = yield* engineHeldAt("dispatch.before-commit")
      yield* Effect.addFinalizer(() => hold.release)
      // A job whose effect failed for good long ago.
      yield* engine.dispatchWithReceipt(submit("j", "work.safe"))
      yield* inStore(Outbox.claim({ kinds: ["work.safe"], owner: "w", now: 0, leaseMs: 30_000, limit: 1, after: 0 }))
      const settle = {
        commandId: "outcome:job:j#1",
        effectId: "job:j",
        attempt: 1,
        aggregateType: "job",
        aggregateId: "j"
      }
      yield* engine.dispatchWithReceipt(
        { ...settle, type: "effect.fail", by: "reactor", error: { message: "no" } },
        { origin: "internal" }
      )
      yield* TestClock.adjust("8 days")
      assert.strictEqual((yield* inStore(Outbox.find("job:j")))!.status, "failed")

      // An operator retries it: its transaction has made the row pending and is about to commit.
      yield* hold.arm
      const retry = yield* Effect.fork(
        engine.dispatchWithReceipt(
          { ...settle, commandId: "op-retry", type: "effect.retry", by: "operator" },
          { origin: "internal" }
        )
      )
      const pid = yield* hold.held
      // Meanwhile a retention round starts on another node's connection, and waits for the row's lock.
      const other = yield* Layer.build(TestStore.layer({ filename: file }))
      const prune = yield* Effect.fork(Effect.provide(Retention.pruneOnce(), other))
      yield* blockedBehind(sql, pid, "retention's DELETE behind the retry")
      yield* hold.release
      assert.strictEqual((yield* Fiber.join(retry)).duplicate, false)
      const pruned = yield* Fiber.join(prune)
      const rows = yield* sql<{ status: string }>`SELECT status FROM outbox WHERE effect_id = 'job:j'`
      // Unsettled rows are never touched: the retried row is pending, and there.
      assert.deepStrictEqual(
        { pruned: pruned.effects, rows: rows.map((r) => r.status) },
        { pruned: 0, rows: ["pending"] }
      )
    })
  )
})
