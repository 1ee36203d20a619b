/**
 * The commit horizon's pure rule (src/storage/CommitHorizon.ts), given/when/then: an observation
 * (newest sequence L, xid R taken after its snapshot) is trusted once a later snapshot's xmin is
 * above R, and one observation waits at a time. The PostgreSQL interleavings are in
 * test/postgres/commit-horizon.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import * as CommitHorizon from "../src/storage/CommitHorizon.js"

describe("commit horizon", () => {
  it("trusts nothing it observed until every xid below the observation's has ended", () => {
    // given an observation of L = 20 with R = 100
    const waiting = CommitHorizon.step(CommitHorizon.initial, 90n, { newest: 20, after: 100n })
    assert.deepStrictEqual(waiting, { trusted: 0, waiting: { newest: 20, after: 100n } })
    // when a later snapshot still has xid 100 or below running, then nothing is trusted
    assert.strictEqual(CommitHorizon.step(waiting, 100n, undefined).trusted, 0)
    // when every xid up to 100 has ended, then L is trusted
    assert.deepStrictEqual(CommitHorizon.step(waiting, 101n, undefined), { trusted: 20, waiting: undefined })
  })

  it("keeps the waiting observation under steady writes instead of replacing it, so it is trusted eventually", () => {
    const first = CommitHorizon.step(CommitHorizon.initial, 90n, { newest: 20, after: 100n })
    // a newer observation arrives while the first still waits: the first stays
    const second = CommitHorizon.step(first, 95n, { newest: 30, after: 110n })
    assert.deepStrictEqual(second.waiting, { newest: 20, after: 100n })
    assert.isFalse(CommitHorizon.wantsObservation(second))
    // the first is trusted, and the same statement's observation starts waiting
    const third = CommitHorizon.step(second, 105n, { newest: 40, after: 120n })
    assert.deepStrictEqual(third, { trusted: 20, waiting: { newest: 40, after: 120n } })
  })

  it("never moves backwards and waits for nothing when nothing new was seen", () => {
    const trusted = { trusted: 50, waiting: undefined }
    assert.deepStrictEqual(CommitHorizon.step(trusted, 200n, { newest: 50, after: 300n }), trusted)
    assert.deepStrictEqual(CommitHorizon.step(trusted, 200n, { newest: 40, after: 300n }), trusted)
    assert.isTrue(CommitHorizon.wantsObservation(trusted))
  })

  it("reads an observation row: no R (the statement's transaction already had an xid) observes nothing", () => {
    const row = { newest: "20", writers: [], after: null }
    assert.deepStrictEqual(CommitHorizon.fromRow(CommitHorizon.initial, row), CommitHorizon.initial)
    assert.deepStrictEqual(CommitHorizon.fromRow(CommitHorizon.initial, { ...row, after: "100" }).waiting, {
      newest: 20,
      after: 100n
    })
  })

  it("trusts the waiting observation once no writer of the schema older than R runs, across xid wraparound", () => {
    const waiting = { trusted: 0, waiting: { newest: 20, after: 100n } }
    // a writer with xid 99 still runs: nothing is trusted; one with 100 (R itself) or later does not count
    assert.strictEqual(
      CommitHorizon.fromRow(waiting, { newest: 25, writers: ["99", "100", "150"], after: null }).trusted,
      0
    )
    assert.strictEqual(CommitHorizon.fromRow(waiting, { newest: 25, writers: ["100", "150"], after: null }).trusted, 20)
    // R = 2^32 + 5 (epoch 1, xid 5): a writer at 32-bit xid 4294967290 (epoch 0) is older; 7 is not
    const wrapped = { trusted: 0, waiting: { newest: 20, after: 2n ** 32n + 5n } }
    assert.strictEqual(CommitHorizon.fromRow(wrapped, { newest: 25, writers: ["4294967290"], after: null }).trusted, 0)
    assert.strictEqual(CommitHorizon.fromRow(wrapped, { newest: 25, writers: ["7"], after: null }).trusted, 20)
  })
})
