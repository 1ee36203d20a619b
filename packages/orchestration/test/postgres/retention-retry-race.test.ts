/**
 * Found by a review (2026-12-05; failed before its fix): retention's DELETE picks settled rows in a subquery and deletes by sequence.
 * On PostgreSQL (READ COMMITTED) a row the subquery saw settled, then re-pended by a transaction that
 * commits while the DELETE waits for its lock, is deleted anyway: the outer WHERE does not re-check it.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, TestClock } from "effect"
import { Engine, FaultPoints, Retention } from "../../src/index.js"
import * as Outbox from "../../src/Outbox.js"
import * as TestStore from "../../src/testing/TestStore.js"
import { tempDbFile } from "../fixtures/harness.js"
import { jobsConfig, submit } from "../fixtures/Jobs.js"

const wait = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))

/** Until retention's DELETE waits for the retried row's lock (seen by the server, not guessed by a sleep). */
const deleteWaitingForLock = Effect.gen(function* () {
  const sql = yield* SqlClient
  for (let i = 0; i < 1_000; i++) {
    const waiting = yield* sql`SELECT 1 FROM pg_stat_activity
      WHERE wait_event_type = 'Lock' AND query LIKE 'DELETE FROM outbox%'`
    if (waiting.length > 0) return
    yield* wait(10)
  }
  return yield* Effect.dieMessage("retention's DELETE never waited for the row's lock")
})

describe("retention racing an operator retry (shared store)", () => {
  it.scoped("a failed row retried to pending while retention's round runs is never deleted", () =>
    Effect.gen(function* () {
      const file = tempDbFile()
      const holding = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const armed = { on: false }
      const holdBeforeCommit = Layer.succeed(FaultPoints.FaultPoints, {
        enabled: true,
        hit: (point) =>
          point === "dispatch.before-commit" && armed.on
            ? Effect.zipRight(
                Effect.sync(() => (armed.on = false)),
                Deferred.succeed(holding, undefined)
              ).pipe(Effect.zipRight(Deferred.await(release)))
            : Effect.void
      })
      const store = yield* Layer.build(
        Engine.layer({ ...jobsConfig, activation: "on-start" }).pipe(
          Layer.provideMerge(TestStore.layer({ filename: file })),
          Layer.provide(holdBeforeCommit)
        )
      )
      const engine = yield* Effect.provide(Engine.Engine, store)
      yield* Effect.addFinalizer(() => Deferred.succeed(release, undefined))
      // Another process's connection pool (the node whose retention round runs now).
      const other = yield* Layer.build(TestStore.layer({ filename: file }))

      // A job whose effect failed for good long ago.
      yield* engine.dispatchWithReceipt(submit("j", "work.safe"))
      yield* Effect.provide(
        Outbox.claim({ kinds: ["work.safe"], owner: "w", now: 0, leaseMs: 30_000, limit: 1, after: 0 }),
        store
      )
      yield* engine.dispatchWithReceipt(
        {
          type: "effect.fail",
          commandId: "outcome:job:j#1",
          effectId: "job:j",
          attempt: 1,
          aggregateType: "job",
          aggregateId: "j",
          by: "reactor",
          error: { message: "no" }
        },
        { origin: "internal" }
      )
      yield* TestClock.adjust("8 days")
      assert.strictEqual((yield* Effect.provide(Outbox.find("job:j"), store))!.status, "failed")

      // An operator retries it: its transaction has made the row pending and is about to commit.
      armed.on = true
      const retry = yield* Effect.fork(
        engine.dispatchWithReceipt(
          {
            type: "effect.retry",
            commandId: "op-retry",
            effectId: "job:j",
            attempt: 1,
            aggregateType: "job",
            aggregateId: "j",
            by: "operator"
          },
          { origin: "internal" }
        )
      )
      yield* Deferred.await(holding)
      // Meanwhile a retention round starts on another connection (it waits for the row's lock).
      const prune = yield* Effect.fork(Effect.provide(Retention.pruneOnce(), other))
      yield* Effect.provide(deleteWaitingForLock, other)
      yield* Deferred.succeed(release, undefined)
      const retried = yield* Fiber.join(retry)
      assert.strictEqual(retried.duplicate, false)
      const pruned = yield* Fiber.join(prune)
      const sql = yield* Effect.provide(SqlClient, other)
      const rows = yield* sql<{ status: string }>`SELECT status FROM outbox WHERE effect_id = 'job:j'`
      // "Unsettled rows are never touched": the retried row is pending and must still be there.
      assert.deepStrictEqual(
        { pruned: pruned.effects, rows: rows.map((r) => r.status) },
        { pruned: 0, rows: ["pending"] }
      )
    })
  )
})
