/**
 * The audit checks the engine's invariants on a store the engine wrote, over any SqlClient: this
 * file runs on SQLite and in the PostgreSQL conformance run. Each defect is planted with raw SQL, as
 * a bug or a hand edit would leave it, and named by the check that finds it.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect } from "effect"
import { Audit, Engine, Retention } from "../src/index.js"
import { engineLayer } from "./fixtures/harness.js"

/** Writes a small history: an account opened (with its welcome effect), a deposit, a refused withdrawal, a no-op. */
const history = Effect.gen(function* () {
  const engine = yield* Engine.Engine
  const opened = yield* engine.dispatchWithReceipt({
    commandId: "o1",
    type: "account.open",
    accountId: "a1",
    owner: "ada"
  })
  yield* engine.dispatchWithReceipt({ commandId: "d1", type: "account.deposit", accountId: "a1", amount: 5 })
  yield* engine.dispatchWithReceipt({ commandId: "d2", type: "account.deposit", accountId: "a1", amount: 7 })
  yield* Effect.flip(
    engine.dispatchWithReceipt({ commandId: "w1", type: "account.withdraw", accountId: "a1", amount: 99 })
  )
  yield* engine.dispatchWithReceipt({ commandId: "t1", type: "account.touch", accountId: "a1" })
  yield* engine.dispatchWithReceipt({ commandId: "o2", type: "account.open", accountId: "a2", owner: "bob" })
  return { welcome: opened.effectIds[0]! }
})

const audit = (now?: number) => Effect.flatMap(Clock.currentTimeMillis, (clock) => Audit.run({ now: now ?? clock }))

const found = (report: Audit.AuditReport) => report.findings.map((f) => `${f.check} ${f.subject}`)

const isSqlite = Effect.map(SqlClient, (sql) => sql.onDialectOrElse({ pg: () => false, orElse: () => true }))

describe("the audit", () => {
  it.effect("a store the engine wrote passes; the counts are the store's", () =>
    Effect.gen(function* () {
      yield* history
      let advanced = 0
      const report = yield* Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Audit.run({ now, advance: (n) => (advanced += n) })
      )
      assert.deepStrictEqual(report.findings, [])
      assert.isTrue(report.ok)
      assert.deepStrictEqual(report.counts, {
        events: 4,
        receipts: 6,
        effects: 2,
        settledEffects: 0,
        head: 4,
        aggregates: 2
      })
      assert.strictEqual(advanced, 4 + 6 + 2)
    }).pipe(Effect.provide(engineLayer()))
  )

  it.effect("a deleted event: its receipt and its aggregate name it (and on SQLite, the hole in the log)", () =>
    Effect.gen(function* () {
      yield* history
      const sql = yield* SqlClient
      yield* sql`DELETE FROM events WHERE command_id = 'd1'`
      const report = yield* audit()
      assert.isFalse(report.ok)
      const expected = ["aggregate-version-gap aggregate account/a1", "receipt-events-missing receipt d1"]
      if (yield* isSqlite) expected.unshift("event-sequence-gap event 2")
      assert.deepStrictEqual(found(report), expected)
      assert.include(report.findings.at(-1)!.message, "the log holds 0 of its 1 event(s)")
    }).pipe(Effect.provide(engineLayer()))
  )

  it.effect("a deleted receipt: its events and its effect have no receipt, unless it may have been pruned", () =>
    Effect.gen(function* () {
      const { welcome } = yield* history
      const sql = yield* SqlClient
      yield* sql`DELETE FROM receipts WHERE command_id = 'o1'`
      assert.deepStrictEqual(found(yield* audit()), [
        "event-without-receipt command o1",
        `effect-without-receipt effect ${welcome}`
      ])
      // Past the receipt retention period (Retention.defaults), the receipt may have been pruned.
      const later = (yield* Clock.currentTimeMillis) + Duration.toMillis(Retention.defaults.receipts) + 1
      assert.deepStrictEqual(found(yield* audit(later)), [])
    }).pipe(Effect.provide(engineLayer()))
  )

  it.effect(
    "an effect's row gone is missing from its receipt; a row settled behind the engine's back was never heard",
    () =>
      Effect.gen(function* () {
        const { welcome } = yield* history
        const sql = yield* SqlClient
        yield* sql`DELETE FROM outbox WHERE effect_id = ${welcome}`
        yield* sql`UPDATE outbox SET status = 'succeeded', attempts = 1 WHERE command_id = 'o2'`
        const report = yield* audit()
        const [row] = yield* sql<{ effect_id: string }>`SELECT effect_id FROM outbox WHERE command_id = 'o2'`
        assert.deepStrictEqual(found(report), [
          "receipt-effect-missing receipt o1",
          `settlement-unheard effect ${row!.effect_id}`
        ])
        assert.include(report.findings[1]!.message, `outcome:${row!.effect_id}#1`)
      }).pipe(Effect.provide(engineLayer()))
  )

  it.effect("events under a rejected command's id, or on another aggregate than its receipt's, are a mismatch", () =>
    Effect.gen(function* () {
      yield* history
      const sql = yield* SqlClient
      yield* sql`UPDATE events SET command_id = 'w1' WHERE command_id = 'd2'`
      yield* sql`UPDATE receipts SET aggregate_id = 'a9' WHERE command_id = 'o2'`
      assert.deepStrictEqual(found(yield* audit()), [
        "receipt-events-missing receipt d2",
        "event-receipt-mismatch receipt o2",
        "event-receipt-mismatch receipt w1"
      ])
    }).pipe(Effect.provide(engineLayer()))
  )
})
