/**
 * The reactors', followers' and retention's reads on PostgreSQL go through indexes, so a store with a
 * long past claims like a new one (issue 20, "claims that do not scan"; the SQLite side is
 * test/claim-plans.test.ts). On a store holding 20,000 settled rows (ANALYZEd, as autovacuum would
 * leave it), each statement is captured as the engine sends it, with its parameters, and run again
 * under EXPLAIN (ANALYZE, BUFFERS): no plan may scan the outbox or the events table, and none may touch
 * more than a few dozen pages (the outbox alone is several hundred: a walk of a whole index, which
 * "no Seq Scan" would not catch, fails too). A re-run changes nothing: the claim finds its rows taken.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Engine } from "../../src/index.js"
import * as EventLog from "../../src/EventLog.js"
import * as Outbox from "../../src/Outbox.js"
import * as ReactorCursors from "../../src/ReactorCursors.js"
import * as Retention from "../../src/Retention.js"
import { jobsEngine, submit } from "../fixtures/Jobs.js"

const history = 20_000
const kinds = ["work.safe"]

/** The statements (text and parameters) `body` sent. */
const sentDuring = <A, E, R>(body: Effect.Effect<A, E, R>) => {
  const sent: Array<readonly [string, ReadonlyArray<unknown>]> = []
  return Statement.withTransformer((statement) =>
    Effect.sync(() => {
      sent.push(statement.compile())
      return statement
    })
  )(body).pipe(Effect.as(sent))
}

/** Every statement sent by a test that captures its engine's fibers too (the one below). */
const everySent: Array<readonly [string, ReadonlyArray<unknown>]> = []

interface Plan {
  readonly text: string
  /** Pages the statement touched (shared buffers hit or read, the top node's total). */
  readonly pages: number
}

/** Each statement `body` sent that mentions `table`, run again under EXPLAIN (ANALYZE, BUFFERS). */
const plansOf = <A, E, R>(body: Effect.Effect<A, E, R>, table: RegExp) =>
  Effect.flatMap(sentDuring(body), (sent) => explained(sent, table))

/** Each of the `sent` statements that mentions `table`, run again under EXPLAIN (ANALYZE, BUFFERS). */
const explained = (all: ReadonlyArray<readonly [string, ReadonlyArray<unknown>]>, table: RegExp) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const sent = all.filter(([text]) => table.test(text) && !/^(BEGIN|COMMIT)/.test(text))
    assert.isAbove(sent.length, 0, `a statement on ${table}`)
    return yield* Effect.forEach(sent, ([text, params]) =>
      Effect.gen(function* () {
        const rows = yield* sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, BUFFERS) ${text}`, params)
        const lines = rows.map((r) => r["QUERY PLAN"])
        // The first "Buffers:" line is the top node's, which counts its children's pages too.
        const buffers = lines.find((line) => line.trim().startsWith("Buffers:")) ?? ""
        const count = (what: string) => Number(new RegExp(`${what}=(\\d+)`).exec(buffers)?.[1] ?? 0)
        return { text: lines.join("\n"), pages: count("hit") + count("read") } satisfies Plan
      })
    )
  })

const assertIndexed = (plans: ReadonlyArray<Plan>) => {
  for (const plan of plans) {
    assert.notMatch(plan.text, /Seq Scan on (outbox|events)\b/, plan.text)
    assert.isAtMost(plan.pages, 64, plan.text)
  }
}

/** The test's engine, activated, its client and the time the test starts at. */
const activeEngine = Effect.gen(function* () {
  const engine = yield* Engine.Engine
  yield* engine.activate
  return { sql: yield* SqlClient, engine, now: Date.now() }
})

describe("claim, cursor, follower and sweep plans on PostgreSQL", () => {
  it.effect(`no read scans the outbox or the log with ${history.toLocaleString("en-US")} settled rows`, () =>
    Effect.gen(function* () {
      const { sql, engine, now } = yield* activeEngine
      // given a store with a long settled history (one aggregate and lane a row) and a few live rows
      yield* sql`INSERT INTO events (event_id, aggregate_type, aggregate_id, version, type, schema_version, payload, command_id, occurred_at)
        SELECT 'hist-' || i || '/e0', 'job', 'h-' || i, 1, 'job.submitted', 1, '{}', 'hist-' || i, ${now}
        FROM generate_series(1, ${history}::int) AS i`
      yield* sql`INSERT INTO outbox (effect_id, command_id, aggregate_type, aggregate_id, kind, payload, lane, status, attempts,
          available_at, response, created_at, updated_at)
        SELECT 'hist-' || i, 'hist-' || i, 'job', 'h-' || i, ${kinds[0]!}, '{}', 'job:h-' || i, 'succeeded', 1, ${now},
          '{}', ${now}, ${now}
        FROM generate_series(1, ${history}::int) AS i`
      yield* engine.dispatchWithReceipt(submit("live", "work.safe", { lane: "one", count: 3 }))
      yield* sql`ANALYZE`
      const head = yield* EventLog.head
      const outboxHead = Number((yield* sql<{ n: number | string }>`SELECT MAX(sequence) AS n FROM outbox`)[0]!.n)
      // when the engine's readers run their statements, then none scans a table
      assertIndexed(
        yield* plansOf(
          Outbox.claimWithNextDue({ kinds, owner: "me", now, leaseMs: 1000, limit: 8, after: 0, upTo: outboxHead }),
          /^WITH\s+claimed AS \(UPDATE outbox SET status = 'running'/
        )
      )
      assertIndexed(yield* plansOf(ReactorCursors.advanceCursor("r", kinds, now, outboxHead), /FROM outbox/))
      assertIndexed(yield* plansOf(Outbox.reclaimable(now, now, 10, kinds, "me"), /FROM outbox/))
      assertIndexed(yield* plansOf(Outbox.runningNotOwnedBy([], 10), /FROM outbox/))
      assertIndexed(yield* plansOf(Outbox.runningNotOwnedBy(["x"], 10), /FROM outbox/))
      assertIndexed(yield* plansOf(EventLog.read({ after: head - 5, limit: 100, upTo: head }), /FROM events/))
      assertIndexed(yield* plansOf(EventLog.head, /FROM events/))
      assertIndexed(yield* plansOf(Retention.pruneOnce(), /FROM outbox/))
    }).pipe(Effect.provide(jobsEngine()))
  )

  // A batch's first statement checks that each aggregate it has cached is still at the cached version.
  // It read that version as MAX(version) over the aggregate's events, which PostgreSQL computed by
  // reading every one of them: a batch for a thread with a long history read its whole history.
  it.effect("a batch's start reads a cached aggregate's version, not its history", () =>
    Effect.gen(function* () {
      const { sql, engine, now } = yield* activeEngine
      // given an aggregate with a long history, loaded once (so the processor caches it)
      yield* sql`INSERT INTO events (event_id, aggregate_type, aggregate_id, version, type, schema_version, payload, command_id, occurred_at)
        SELECT 'long/e' || i, 'job', 'long', i, 'job.cancel-asked', 1, '{"type":"job.cancel-asked","effectIds":[]}', 'hist-' || i, ${now}
        FROM generate_series(1, ${history}::int) AS i`
      yield* sql`ANALYZE`
      const cancel = (n: number) => ({ commandId: `cancel-${n}`, type: "job.cancel", jobId: "long", effectIds: [] })
      yield* engine.dispatchWithReceipt(cancel(1))
      // when the next command for it starts a batch (on the processor's fiber, which the capture reaches
      // because the engine was built inside it)
      const from = everySent.length
      yield* engine.dispatchWithReceipt(cancel(2))
      const plans = yield* explained(everySent.slice(from), /FROM receipts r WHERE/)
      // then that statement reads a few pages, not the aggregate's history
      assertIndexed(plans)
      // and both commands were decided on the cached state and written
      const written = yield* sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM events WHERE aggregate_id = 'long'`
      assert.strictEqual(Number(written[0]!.n), history + 2)
    }).pipe(
      Effect.provide(jobsEngine()),
      Statement.withTransformer((statement) =>
        Effect.sync(() => {
          everySent.push(statement.compile())
          return statement
        })
      )
    )
  )
})
