/**
 * Two settlements of one outbox row by writers that are not ordered with each other (two processes,
 * without the append lock; here a raw session stands in for the other process): the second decides
 * on the row the first left, never on the row as it was before, and a write whose row moved since
 * it was read is a lost race (run again), never a blind overwrite.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { EffectOutcomes } from "../../src/index.js"
import * as Outbox from "../../src/Outbox.js"
import { isLostRace, toStorageFailure } from "../../src/storage/StorageErrors.js"
import { submit } from "../fixtures/Jobs.js"
import { blockedBehind, engineOn, otherSession } from "./sessions.js"

const fail = (attempt: number) => ({
  type: "effect.fail",
  commandId: EffectOutcomes.outcomeId("job:j1", attempt),
  effectId: "job:j1",
  attempt,
  aggregateType: "job",
  aggregateId: "j1",
  by: "reactor",
  error: { message: "no" }
})

/** The job's effect row, claimed (running at attempt 1) as a reactor would. */
const claimJob = Effect.suspend(() =>
  Outbox.claim({ kinds: ["work.safe"], owner: "owner-A", now: Date.now() + 1_000, leaseMs: 30_000, limit: 1, after: 0 })
)

describe("two settlements of one row from unordered writers", () => {
  it.scopedLive(
    "a settlement decided while another writer's settlement of the row is open decides on what it left",
    () =>
      Effect.gen(function* () {
        const { engine, sql, schema, inStore } = yield* engineOn
        yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
        const claimed = yield* inStore(claimJob)
        assert.strictEqual(claimed.length, 1)
        // The other process settles attempt 1 as succeeded, its transaction still open.
        const other = yield* otherSession(
          `UPDATE ${schema}.outbox SET status = 'succeeded', lease_owner = NULL, lease_expires_at = NULL WHERE effect_id = 'job:j1'`
        )
        const settle = yield* Effect.fork(Effect.exit(engine.dispatchWithReceipt(fail(1), { origin: "internal" })))
        yield* blockedBehind(sql, other.pid, "the settlement's read of the row waits for the open one")
        yield* other.commit
        const answer = yield* Fiber.join(settle)
        // Decided on `succeeded`: a stale outcome, and the row keeps the first settlement.
        assert.isTrue(Exit.isFailure(answer), `the second settlement was answered ${String(answer)}`)
        const row = yield* inStore(Outbox.find("job:j1"))
        assert.strictEqual(row?.status, "succeeded")
      })
  )

  it.scopedLive("a row change whose row moved since it was read changes nothing and is a lost race", () =>
    Effect.gen(function* () {
      const { engine, inStore } = yield* engineOn
      yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
      const [row] = yield* inStore(claimJob)
      const change = (effectId: string, fromStatus: Outbox.OutboxStatus): Outbox.PagedChange => ({
        effectId,
        sequence: row!.sequence,
        attempt: 1,
        fromStatus,
        status: "failed",
        availableAt: undefined,
        response: undefined,
        error: null,
        keepLease: false,
        operatorActions: 0,
        requeued: false,
        now: 1
      })
      // Read as pending, but the row is running now: one alike group, and one of distinct changes.
      for (const changes of [
        [change("job:j1", "pending")],
        [change("job:j1", "pending"), change("job:none", "running")]
      ]) {
        const exit = yield* inStore(Effect.exit(Outbox.applyChanges(changes)))
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isFailure(exit)) {
          const failure = toStorageFailure("settle")(exit.cause._tag === "Fail" ? exit.cause.error : undefined)
          assert.isTrue(isLostRace(failure), `not a lost race: ${failure.message}`)
        }
      }
      assert.strictEqual((yield* inStore(Outbox.find("job:j1")))?.status, "running")
    })
  )
})
