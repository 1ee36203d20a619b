/**
 * The audit's rules, one row at a time and without a store (Audit.ts reads the rows and states
 * why each rule holds; test/audit.test.ts runs it on stores the engine wrote).
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration } from "effect"
import { AuditFindings, Retention } from "../src/index.js"

describe("the audit's rules", () => {
  it("sequence holes are reported as ranges, across pages", () => {
    assert.deepStrictEqual(AuditFindings.sequenceGaps(0, [1, 2, 3]), [])
    assert.deepStrictEqual(
      AuditFindings.sequenceGaps(0, [2, 3, 7]).map((p) => p.subject),
      ["event 1", "events 4..6"]
    )
    assert.deepStrictEqual(
      AuditFindings.sequenceGaps(10, [12]).map((p) => p.subject),
      ["event 11"]
    )
  })

  it("a settled row without evidence is unheard; a pruned-age row is not counted; a pending one never", () => {
    const now = 100 * 24 * 3_600_000
    const horizons = Retention.horizonsAt(now)
    const row = {
      effect_id: "e1",
      command_id: "c1",
      status: "succeeded",
      attempts: 2,
      aggregate_type: "thread",
      aggregate_id: "t1",
      created_at: now - 1_000,
      updated_at: now - 500,
      decided: "accepted",
      heard: 0
    }
    const unheard = AuditFindings.outboxProblems(row, horizons)
    assert.deepStrictEqual(
      unheard.map((p) => p.check),
      ["settlement-unheard"]
    )
    assert.include(unheard[0]!.message, "outcome:e1#2, reconcile:e1#2 or reclaim:e1#2")
    assert.deepStrictEqual(AuditFindings.outboxProblems({ ...row, heard: 1 }, horizons), [])
    assert.deepStrictEqual(AuditFindings.outboxProblems({ ...row, status: "pending" }, horizons), [])
    const old = now - 40 * 24 * 3_600_000
    assert.deepStrictEqual(
      AuditFindings.outboxProblems({ ...row, created_at: old, updated_at: old, decided: null }, horizons),
      []
    )
    assert.deepStrictEqual(
      AuditFindings.outboxProblems({ ...row, decided: null, heard: 1 }, horizons).map((p) => p.check),
      ["effect-without-receipt"]
    )
  })

  it("a receipt's events must be exactly its sequences, under its aggregate", () => {
    const receipt = {
      command_id: "c1",
      status: "accepted" as const,
      aggregate_type: "thread",
      aggregate_id: "t1",
      first_sequence: 4,
      last_sequence: 6,
      effect_ids: "[]",
      accepted_at: 0,
      n: 3,
      lo: 4,
      hi: 6,
      foreign_n: 0
    }
    assert.deepStrictEqual(AuditFindings.receiptProblems(receipt, []), [])
    assert.deepStrictEqual(
      AuditFindings.receiptProblems({ ...receipt, n: 2, hi: 5 }, []).map((p) => p.check),
      ["receipt-events-missing"]
    )
    assert.deepStrictEqual(
      AuditFindings.receiptProblems({ ...receipt, status: "rejected", first_sequence: null }, []).map((p) => p.check),
      ["event-receipt-mismatch"]
    )
    assert.deepStrictEqual(
      AuditFindings.receiptProblems({ ...receipt, foreign_n: 1 }, ["e9"]).map((p) => p.check),
      ["event-receipt-mismatch", "receipt-effect-missing"]
    )
  })

  it("an aggregate's versions run 1..n; otherwise the missing count is named", () => {
    assert.deepStrictEqual(
      AuditFindings.versionProblems({ aggregate_type: "t", aggregate_id: "a", n: 3, lo: 1, hi: 3 }),
      []
    )
    const [gap] = AuditFindings.versionProblems({ aggregate_type: "t", aggregate_id: "a", n: 3, lo: 1, hi: 5 })
    assert.strictEqual(gap!.check, "aggregate-version-gap")
    assert.include(gap!.message, "2 version(s) missing")
  })

  it("a receipt's effects are looked for only while settled rows are kept", () => {
    const receipt: AuditFindings.ReceiptRow = {
      command_id: "c",
      status: "accepted",
      aggregate_type: "t",
      aggregate_id: "a",
      first_sequence: 1,
      last_sequence: 1,
      effect_ids: '["e1","e2"]',
      accepted_at: 1_000,
      n: 1,
      lo: 1,
      hi: 1,
      foreign_n: 0
    }
    assert.deepStrictEqual(AuditFindings.listedEffects(receipt, Retention.horizonsAt(1_000)), ["e1", "e2"])
    const later = 1_000 + Duration.toMillis(Retention.defaults.settledEffects) + 1
    assert.deepStrictEqual(AuditFindings.listedEffects(receipt, Retention.horizonsAt(later)), [])
    assert.deepStrictEqual(AuditFindings.listedEffects({ ...receipt, status: "rejected" }, Retention.horizonsAt(0)), [])
    assert.deepStrictEqual(
      AuditFindings.listedEffects({ ...receipt, effect_ids: "not json" }, Retention.horizonsAt(0)),
      []
    )
  })
})
