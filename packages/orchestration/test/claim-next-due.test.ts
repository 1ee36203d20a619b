/**
 * The reactor's claim on a store without a change count (PostgreSQL) reads, in the same round trip,
 * when the next pending row comes due after `now` (Outbox.claimWithNextDue): the reactor sleeps
 * until then. It must claim what `claim` claims and answer the due time of rows it did not claim,
 * never of rows it claimed (they are due by `now`). Both stores: PostgreSQL in one statement (the
 * UPDATE in a CTE), SQLite in two.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Engine } from "../src/index.js"
import * as Outbox from "../src/Outbox.js"
import { jobsEngine, submit } from "./fixtures/Jobs.js"
import * as TestStore from "../src/testing/TestStore.js"

const kinds = ["work.safe"]
const claimAt = (now: number) =>
  Effect.map(Outbox.claimWithNextDue({ kinds, owner: "me", now, leaseMs: 60_000, limit: 10, after: 0 }), (read) => ({
    claimed: read.claimed.map((row) => row.effectId),
    due: read.due
  }))

describe("a claim that reads the next due time", () => {
  it.effect("claims the due rows and answers when the next one not yet due comes due", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const sql = yield* SqlClient
      yield* engine.activate
      // given three pending rows on three lanes, due at 0, 5,000 and 2,000, and one of another kind due at 1,000
      for (const job of ["a", "b", "c"]) yield* engine.dispatchWithReceipt(submit(job, "work.safe"))
      yield* engine.dispatchWithReceipt(submit("other", "work.other"))
      yield* sql`UPDATE outbox SET available_at = 5000 WHERE effect_id = 'job:b'`
      yield* sql`UPDATE outbox SET available_at = 2000 WHERE effect_id = 'job:c'`
      yield* sql`UPDATE outbox SET available_at = 1000 WHERE effect_id = 'job:other'`
      // when claiming at 0, then the row due claims and the next due time is c's
      assert.deepStrictEqual(yield* claimAt(0), { claimed: ["job:a"], due: 2000 })
      // when nothing is due, then nothing is claimed and the due time is still answered
      assert.deepStrictEqual(yield* claimAt(1999), { claimed: [], due: 2000 })
      // when c comes due, then it is claimed and b's time is next; after b, nothing is left
      assert.deepStrictEqual(yield* claimAt(2000), { claimed: ["job:c"], due: 5000 })
      assert.deepStrictEqual(yield* claimAt(5000), { claimed: ["job:b"], due: undefined })
      const running = yield* Outbox.list({ status: "running" })
      assert.deepStrictEqual(running.map((row) => [row.effectId, row.leaseOwner]).sort(), [
        ["job:a", "me"],
        ["job:b", "me"],
        ["job:c", "me"]
      ])
    }).pipe(Effect.provide(jobsEngine()))
  )

  it.effect("says whether it may have left a claimable row for want of a slot", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.activate
      // given three claimable rows on three lanes, and a fourth behind the first in its lane
      for (const job of ["a", "b", "c"]) yield* engine.dispatchWithReceipt(submit(job, "work.safe", { lane: job }))
      yield* engine.dispatchWithReceipt(submit("a2", "work.safe", { lane: "a" }))
      const claimTwo = Outbox.claimWithNextDue({ kinds, owner: "me", now: 0, leaseMs: 60_000, limit: 2, after: 0 })
      const onPostgres = TestStore.testStoreKind() === "postgres"
      // when two slots claim, then one claimable row is left (a2 waits behind a, so it is not one)
      const first = yield* claimTwo
      assert.deepStrictEqual(
        first.claimed.map((row) => row.effectId),
        ["job:a", "job:b"]
      )
      assert.strictEqual(first.more, true)
      // when one slot claims, then c fills it and nothing claimable is left: on PostgreSQL the claim says so
      // although it took as many rows as it had slots; SQLite's claim, which lists nothing beyond its limit,
      // cannot tell and says that it may have left one
      const second = yield* Outbox.claimWithNextDue({ kinds, owner: "me", now: 0, leaseMs: 60_000, limit: 1, after: 0 })
      assert.deepStrictEqual(
        second.claimed.map((row) => row.effectId),
        ["job:c"]
      )
      assert.strictEqual(second.more, !onPostgres)
      // when a slot claims with nothing claimable, then it says so too
      const third = yield* Outbox.claimWithNextDue({ kinds, owner: "me", now: 0, leaseMs: 60_000, limit: 1, after: 0 })
      assert.deepStrictEqual(third.claimed, [])
      assert.strictEqual(third.more, false)
    }).pipe(Effect.provide(jobsEngine()))
  )
})
