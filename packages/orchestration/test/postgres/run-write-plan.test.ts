/**
 * A run of commands is written in one statement on PostgreSQL (PgCommitWriter, CommitWriter.writeCommands);
 * a receipt without events takes the newest sequence of the receipts before it. That running maximum
 * must be one pass over the run: as a subquery per receipt it was quadratic, and a reconcile page of
 * 2,000 settlements spent 0.67 s in that statement (docs/benchmarks-postgres.md). The statement is
 * captured as the writer sends it, with its values, and its plan checked: no per-row subquery.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import pg from "pg"
import * as CommitWriter from "../../src/storage/CommitWriter.js"
import { migrate } from "../../src/storage/Migrations.js"
import { writeTransaction } from "../../src/storage/Transactions.js"
import * as TestStore from "../../src/testing/TestStore.js"

/** Every (text, values) node-postgres sent while `body` ran. */
const sentDuring = <A, E, R>(body: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const sent: Array<{ readonly text: string; readonly values: ReadonlyArray<unknown> }> = []
      const original = pg.Client.prototype.query
      pg.Client.prototype.query = function (this: pg.Client, config: unknown, ...rest: Array<unknown>) {
        const text = typeof config === "string" ? config : ((config as { text?: string }).text ?? "")
        const values = typeof config === "string" ? rest[0] : (config as { values?: unknown }).values
        sent.push({ text, values: Array.isArray(values) ? values : [] })
        return (original as (...args: Array<unknown>) => unknown).call(this, config, ...rest)
      } as typeof original
      return { sent, original }
    }),
    ({ sent }) => Effect.as(body, sent),
    ({ original }) =>
      Effect.sync(() => {
        pg.Client.prototype.query = original
      })
  )

const rowsOf = (n: number): ReadonlyArray<CommitWriter.CommandRows> =>
  Array.from({ length: n }, (_, i) => {
    const commandId = `c${i}`
    // Every other command writes no event: its receipt needs the running maximum.
    const events =
      i % 2 === 0
        ? [
            {
              eventId: `${commandId}/e`,
              aggregateType: "account",
              aggregateId: `a${i}`,
              version: 1,
              type: "account.deposited",
              schemaVersion: 1,
              payloadJson: "{}",
              commandId,
              occurredAt: 1_000
            }
          ]
        : []
    return {
      events,
      effects: [],
      receipt: {
        commandId,
        aggregateType: "account",
        aggregateId: `a${i}`,
        commandType: "account.deposit",
        fingerprint: `fp-${commandId}`,
        status: "accepted",
        effectIds: [],
        rejection: null,
        acceptedAt: 2_000
      }
    }
  })

describe("a run's write on PostgreSQL", () => {
  it.effect("takes each receipt's sequence in one pass over the run, not a subquery per receipt", () =>
    Effect.gen(function* () {
      yield* migrate
      const sql = yield* SqlClient
      const writer = yield* CommitWriter.forStore
      // when a run of 200 commands is written, half of them without events
      const sent = yield* sentDuring(writeTransaction("test", writer.writeCommands(rowsOf(200), 0)))
      const run = sent.filter((s) => s.text.startsWith("WITH e AS") && s.text.includes("ORDINALITY"))
      assert.strictEqual(run.length, 1)
      // then each receipt without events holds the newest sequence before it
      const receipts = yield* sql<{ command_id: string; last_sequence: number | string }>`
        SELECT command_id, last_sequence FROM receipts WHERE command_id IN ('c1', 'c3', 'c199')`
      assert.deepStrictEqual(Object.fromEntries(receipts.map((r) => [r.command_id, Number(r.last_sequence)])), {
        c1: 1,
        c3: 2,
        c199: 100
      })
      // and its plan has no per-row subquery
      const plan = (yield* sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ${run[0]!.text}`, run[0]!.values)).map(
        (r) => r["QUERY PLAN"]
      )
      assert.isFalse(
        plan.some((line) => line.includes("SubPlan")),
        plan.join("\n")
      )
    }).pipe(Effect.provide(TestStore.layer()))
  )
})
