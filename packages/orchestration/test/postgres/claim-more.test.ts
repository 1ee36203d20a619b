/**
 * A claim's `more` (Outbox.claimWithNextDue) says whether it left a claimable row unclaimed. On
 * PostgreSQL the claim skips rows another transaction holds locked (SKIP LOCKED), so "fewer rows than
 * slots" does not mean "nothing left": a reactor told it was covered by such a claim would wait for its
 * poll while the row is released unclaimed (CommitClaims.Claimer's `covered`, Reactor.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Outbox from "../../src/Outbox.js"
import { submit } from "../fixtures/Jobs.js"
import { engineOn, otherSession } from "./sessions.js"

/** A claim with room for four rows, now. */
const claimFour = () =>
  Outbox.claimWithNextDue({ kinds: ["work.safe"], owner: "me", now: Date.now(), leaseMs: 60_000, limit: 4, after: 0 })

describe("a claim's `more` on PostgreSQL", () => {
  it.scoped("a claimable row another transaction holds is left unclaimed and said to be left", () =>
    Effect.gen(function* () {
      const { engine, inStore, schema } = yield* engineOn
      // given two claimable rows, one of them locked by another session's open transaction
      yield* engine.dispatchWithReceipt(submit("held", "work.safe", { lane: "held" }))
      yield* engine.dispatchWithReceipt(submit("free", "work.safe", { lane: "free" }))
      const other = yield* otherSession(`SELECT 1 FROM ${schema}.outbox WHERE effect_id = 'job:held' FOR UPDATE`)
      // when a claim with room for both runs, then it takes the free one and says one was left
      const read = yield* inStore(claimFour())
      assert.deepStrictEqual(
        read.claimed.map((row) => row.effectId),
        ["job:free"]
      )
      assert.strictEqual(read.more, true)
      // when the lock is gone, then the next claim takes it and leaves nothing
      yield* other.commit
      const again = yield* inStore(claimFour())
      assert.deepStrictEqual(
        again.claimed.map((row) => row.effectId),
        ["job:held"]
      )
      assert.strictEqual(again.more, false)
    })
  )
})
