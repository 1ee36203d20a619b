/**
 * On PostgreSQL the store's connections pipeline (node-postgres `pipeline: true`), and a write transaction
 * sends its BEGIN without waiting for the answer (StoreBackend.beginAhead): the first statement goes out
 * behind it, one round trip fewer on the dispatch path (docs/benchmarks-postgres.md). The first statement
 * must still be inside the transaction: it rolls back with it.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { writeTransaction } from "../../src/storage/Transactions.js"
import * as TestStore from "../../src/testing/TestStore.js"
import { tempDbFile } from "../fixtures/harness.js"
import { orderDuring } from "./sentOrder.js"

class Refused {
  readonly _tag = "Refused"
}

describe("a write transaction on PostgreSQL", () => {
  it.effect("sends its first statement before BEGIN is answered, and that statement rolls back with it", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient
      yield* sql`CREATE TABLE begin_ahead (n INTEGER NOT NULL)`
      for (let i = 0; i < 20; i++) {
        // when a transaction inserts a row, then fails
        const { exit, order } = yield* orderDuring(
          writeTransaction(
            "test",
            Effect.zipRight(sql`INSERT INTO begin_ahead VALUES (${i})`, Effect.fail(new Refused()))
          )
        )
        assert.isTrue(Exit.isFailure(exit))
        // then the INSERT went out behind the BEGIN, before its answer
        const sentBegin = order.indexOf("sent BEGIN")
        const sentInsert = order.findIndex((entry) => entry.startsWith("sent INSERT"))
        assert.isAtLeast(sentBegin, 0, order.join(", "))
        assert.isAbove(sentInsert, sentBegin, order.join(", "))
        assert.isBelow(sentInsert, order.indexOf("answered BEGIN"), order.join(", "))
      }
      // and none of the rows stayed: each INSERT ran inside its transaction
      const rows = yield* sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM begin_ahead`
      assert.strictEqual(Number(rows[0]!.n), 0)
      // while a transaction that succeeds keeps its first statement's row
      const kept = yield* orderDuring(writeTransaction("test", sql`INSERT INTO begin_ahead VALUES (99)`))
      assert.isTrue(Exit.isSuccess(kept.exit))
      const after = yield* sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM begin_ahead`
      assert.strictEqual(Number(after[0]!.n), 1)
    }).pipe(Effect.provide(TestStore.layer({ filename: tempDbFile() })))
  )
})
