/**
 * The reactors' and retention's reads on SQLite go through indexes that hold no settled history, so a
 * store with a long past claims like a new one (docs/benchmarks.md, "Flat with history"). Each
 * statement is captured as the engine prepares it and its EXPLAIN QUERY PLAN is checked: no step may
 * scan the outbox, and the lane check and retention's sweep must use the partial indexes.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect } from "effect"
import { Engine } from "../src/index.js"
import * as Outbox from "../src/Outbox.js"
import * as ReactorCursors from "../src/ReactorCursors.js"
import * as Retention from "../src/Retention.js"
import { jobsEngine, submit } from "./fixtures/Jobs.js"

/** The SQL texts better-sqlite3 prepared while `body` ran (first preparations only: the client caches). */
const preparedDuring = <A, E, R>(body: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const seen: Array<string> = []
      const original = Database.prototype.prepare
      Database.prototype.prepare = function (this: Database.Database, source: string) {
        seen.push(source)
        return original.call(this, source)
      } as typeof original
      return { seen, original }
    }),
    ({ seen }) => Effect.as(body, seen),
    ({ original }) =>
      Effect.sync(() => {
        Database.prototype.prepare = original
      })
  )

const planOf = (statement: string) =>
  // Parameters bound as NULL: the plan does not depend on their values (no statistics are gathered).
  Effect.flatMap(SqlClient, (sql) =>
    sql.unsafe<{ detail: string }>(
      `EXPLAIN QUERY PLAN ${statement}`,
      Array.from(statement.matchAll(/\?/g), () => null)
    )
  ).pipe(Effect.map((rows) => rows.map((r) => r.detail)))

/** The plan of the one statement on `table` that `body` prepared. */
const planOfOne = <A, E, R>(body: Effect.Effect<A, E, R>, matches: RegExp) =>
  Effect.gen(function* () {
    const statements = (yield* preparedDuring(body)).filter((s) => matches.test(s))
    assert.strictEqual(statements.length, 1, `one statement matching ${matches}: ${statements.join(" | ")}`)
    return yield* planOf(statements[0]!)
  })

/** No step scans the outbox, every `uses` text names a step, and (unless `sorts`) nothing is sorted. */
const assertPlan = (plan: ReadonlyArray<string>, uses: ReadonlyArray<string>, sorts = false) => {
  const shown = plan.join(" / ")
  for (const step of plan) assert.notMatch(step, /^SCAN (outbox|o|e)\b/, `a scan in ${shown}`)
  for (const text of uses)
    assert.isTrue(
      plan.some((step) => step.includes(text)),
      `${text} in ${shown}`
    )
  if (!sorts)
    assert.isFalse(
      plan.some((step) => step.includes("TEMP B-TREE")),
      shown
    )
}

const kinds = ["work.safe"]

describe("claim and sweep plans on SQLite", () => {
  it.effect("the claim's lane check reads only unsettled rows of the lane", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.activate
      yield* engine.dispatchWithReceipt(submit("a", "work.safe", { lane: "one", count: 3 }))
      const plan = yield* planOfOne(
        Outbox.claim({ kinds, owner: "me", now: 0, leaseMs: 1000, limit: 8, after: 0 }),
        /^UPDATE outbox SET status = 'running'/
      )
      assertPlan(plan, [
        "outbox_unsettled_by_lane (lane=? AND sequence<?)",
        "outbox_by_status_kind (status=? AND kind=? AND sequence>?)"
      ])
    }).pipe(Effect.provide(jobsEngine()))
  )

  it.effect("the cursor advance, lease expiry and dead-owner sweeps start from the running or pending rows", () =>
    Effect.gen(function* () {
      const advance = yield* planOfOne(ReactorCursors.advanceCursor("r", kinds, 0), /^INSERT INTO reactor_cursors/)
      assertPlan(advance, ["COVERING INDEX outbox_by_status_kind (status=? AND kind=?)"])
      const expired = yield* planOfOne(Outbox.reclaimable(0, 0, 10, kinds, "me"), /LEFT JOIN owners/)
      // With several kinds SQLite may sort by sequence: only the running rows of those kinds.
      assertPlan(expired, ["outbox_by_status_kind (status=? AND kind=?)"], true)
      for (const sweep of [Outbox.runningNotOwnedBy([], 10), Outbox.runningNotOwnedBy(["x"], 10)]) {
        const plan = yield* planOfOne(sweep, /^SELECT \* FROM outbox WHERE status = 'running'/)
        assertPlan(plan, ["outbox_running (status=?)"])
      }
    }).pipe(Effect.provide(jobsEngine()))
  )

  it.effect("retention's sweep finds old settled rows by their settlement time", () =>
    Effect.gen(function* () {
      const plan = yield* planOfOne(Retention.pruneOnce(), /^DELETE FROM outbox/)
      assertPlan(plan, ["outbox_settled_by_time (status=? AND updated_at<?)"])
    }).pipe(Effect.provide(jobsEngine()))
  )
})
