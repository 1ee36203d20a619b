/**
 * The audit on PostgreSQL, where the log may have holes: a sequence value is handed out outside the
 * transaction, so a dispatch that rolls back leaves one (gaps are allowed, skips never). The audit
 * must not call such a hole a finding, while every other invariant is checked as on SQLite
 * (test/audit.test.ts runs there too).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { Audit, Engine } from "../../src/index.js"
import { engineLayer } from "../fixtures/harness.js"

describe("the audit on PostgreSQL", () => {
  it.effect("a sequence value used by a transaction that rolled back is not a finding; a lost event still is", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const sql = yield* SqlClient
      yield* engine.dispatchWithReceipt({ commandId: "o1", type: "account.open", accountId: "a1", owner: "ada" })
      // What a rolled-back append leaves: a value taken from the sequence and never committed.
      yield* sql
        .withTransaction(
          Effect.zipRight(
            sql`SELECT nextval(pg_get_serial_sequence('events', 'sequence'))`,
            Effect.fail("roll back" as const)
          )
        )
        .pipe(Effect.flip)
      yield* engine.dispatchWithReceipt({ commandId: "d1", type: "account.deposit", accountId: "a1", amount: 5 })
      const sequences = yield* sql<{ sequence: string }>`SELECT sequence FROM events ORDER BY sequence`
      assert.deepStrictEqual(
        sequences.map((r) => Number(r.sequence)),
        [1, 3]
      )
      const now = yield* Clock.currentTimeMillis
      const clean = yield* Audit.run({ now })
      assert.deepStrictEqual(clean.findings, [])
      assert.strictEqual(clean.counts.head, 3)

      yield* sql`DELETE FROM events WHERE command_id = 'd1'`
      const lost = yield* Audit.run({ now })
      assert.deepStrictEqual(
        lost.findings.map((f) => `${f.check} ${f.subject}`),
        ["receipt-events-missing receipt d1"]
      )
    }).pipe(Effect.provide(engineLayer()))
  )
})
