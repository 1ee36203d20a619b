/**
 * A statement outside a transaction holds the connection's permit while it runs on the driver, so it
 * can never run inside another fiber's open transaction (and vanish with that transaction's rollback).
 * The scheduler here runs ready fibers in a seeded order and makes each yield after a few operations,
 * as the simulator's does, so plain writes and failing transactions interleave at many points.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, type Scheduler } from "effect"
import * as SqliteClient from "../src/storage/SqliteClient.js"
import { mulberry32 } from "../src/testing/index.js"

class Seeded implements Scheduler.Scheduler {
  readonly ready: Array<() => void> = []
  constructor(
    readonly next: () => number,
    readonly ops: number
  ) {}
  scheduleTask(task: () => void) {
    this.ready.push(task)
  }
  shouldYield(fiber: { readonly currentOpCount: number }) {
    return fiber.currentOpCount > this.ops ? 0 : false
  }
  runAll() {
    while (this.ready.length > 0) {
      const i = Math.floor(this.next() * this.ready.length)
      const [task] = this.ready.splice(i, 1)
      task!()
    }
  }
}

const writesAndRollbacks = Effect.gen(function* () {
  const sql = yield* SqlClient
  yield* sql`CREATE TABLE t (id INTEGER PRIMARY KEY)`
  // Half go straight to the driver, half through @effect/sql's own path (under a statement transformer).
  const plain = Array.from({ length: 20 }, (_, i) =>
    i % 2 === 0
      ? sql`INSERT INTO t (id) VALUES (${i + 1})`
      : Statement.withTransformer(sql`INSERT INTO t (id) VALUES (${i + 1})`, (statement) => Effect.succeed(statement))
  )
  const failing = Array.from({ length: 20 }, (_, i) =>
    Effect.ignore(
      sql.withTransaction(sql`INSERT INTO t (id) VALUES (${i + 1000})`.pipe(Effect.zipRight(Effect.fail("refused"))))
    )
  )
  yield* Effect.all([...plain, ...failing], { concurrency: "unbounded", discard: true })
  return (yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM t`)[0]!.n
}).pipe(Effect.scoped, Effect.provide(SqliteClient.layer({ filename: ":memory:" })))

describe("SQLite client permit", () => {
  it("a write outside a transaction never runs inside another fiber's transaction", () => {
    for (let seed = 1; seed <= 40; seed++) {
      const scheduler = new Seeded(mulberry32(seed), 16 + (seed % 48))
      const fiber = Effect.runFork(writesAndRollbacks, { scheduler })
      scheduler.runAll()
      // Every plain write is kept; every failing transaction's write is rolled back, and nothing else.
      assert.deepStrictEqual(fiber.unsafePoll(), Exit.succeed(20), `seed ${seed}`)
    }
  })
})
