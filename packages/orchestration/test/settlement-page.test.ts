import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Engine, Reconcile } from "../src/index.js"
import * as Outbox from "../src/Outbox.js"
import * as Owners from "../src/Owners.js"
import { jobsEngine, submit } from "./fixtures/Jobs.js"
import { tempDbFile } from "./fixtures/harness.js"

const ROWS = 40

/** A process that died with ROWS effects claimed, and a reactor cursor that had run past them all. */
const deadProcess = Effect.gen(function* () {
  const engine = yield* Engine.Engine
  yield* engine.activate
  for (let i = 0; i < ROWS; i++) {
    yield* engine.dispatchWithReceipt(submit(`j${i}`, i % 3 === 0 ? "work.bound" : "work.safe"))
  }
  yield* Owners.heartbeat("dead-process", "node-A", 0)
  yield* Outbox.claim({
    kinds: ["work.safe", "work.bound"],
    owner: "dead-process",
    now: 0,
    leaseMs: 30_000,
    limit: ROWS,
    after: 0
  })
  const sql = yield* SqlClient
  yield* sql`INSERT INTO reactor_cursors (reactor, position, updated_at) VALUES ('ahead', 100000, 0)`
})

/** Two settlements of one row, which a page must write as one change: a requeue, then a cancel. */
const twoOnOneRow = [
  {
    type: "effect.requeue",
    commandId: "reconcile:job:j1#1",
    effectId: "job:j1",
    attempt: 1,
    aggregateType: "job",
    aggregateId: "j1",
    by: "reconcile",
    reason: Reconcile.requeueReason
  },
  {
    type: "effect.cancel",
    commandId: "operator:cancel:job:j1#1.0",
    effectId: "job:j1",
    aggregateType: "job",
    aggregateId: "j1",
    by: "operator"
  }
]

const policies = new Map([
  ["work.safe", "replay-safe" as const],
  ["work.bound", "process-bound" as const]
])

/** Everything the settlements wrote, in a comparable order. */
const snapshot = Effect.gen(function* () {
  const sql = yield* SqlClient
  return {
    outbox: yield* sql`SELECT * FROM outbox ORDER BY sequence`,
    receipts: yield* sql`SELECT * FROM receipts ORDER BY command_id`,
    events:
      yield* sql`SELECT sequence, event_id, aggregate_id, version, type, payload, command_id FROM events ORDER BY sequence`,
    jobs: yield* sql`SELECT * FROM job_status ORDER BY effect_id`,
    cursors: yield* sql`SELECT reactor, position FROM reactor_cursors ORDER BY reactor`
  }
})

describe("settlement pages", () => {
  it.effect(
    "a page of settlements stores the same rows, reasons, receipts and events as settling them one by one",
    () =>
      Effect.gen(function* () {
        const paged = tempDbFile()
        const single = tempDbFile()
        yield* deadProcess.pipe(Effect.provide(jobsEngine(paged)))
        yield* deadProcess.pipe(Effect.provide(jobsEngine(single)))

        // Paged: boot, not activated; the two settlements share one batch, reconcile settles the rest in one.
        const pagedReport = yield* Effect.gen(function* () {
          const engine = yield* Engine.Engine
          const answers = yield* engine.dispatchManyDuringBoot(twoOnOneRow)
          assert.isTrue(answers.every((a) => a._tag === "Success"))
          return yield* Reconcile.reconcileAfterProcessLoss({ policies })
        }).pipe(Effect.provide(jobsEngine(paged)))
        const pagedStore = yield* snapshot.pipe(Effect.provide(jobsEngine(paged)))

        // One by one: a batch holds one command, so every page is one row.
        const singleReport = yield* Effect.gen(function* () {
          const engine = yield* Engine.Engine
          yield* engine.activate
          for (const command of twoOnOneRow) yield* engine.dispatchWithReceipt(command, { origin: "internal" })
          return yield* Reconcile.reconcileAfterProcessLoss({ policies })
        }).pipe(Effect.provide(jobsEngine(single, { maxBatch: 1 })))
        const singleStore = yield* snapshot.pipe(Effect.provide(jobsEngine(single)))

        assert.deepStrictEqual(pagedReport, singleReport)
        assert.deepStrictEqual(pagedReport, { requeued: 25, failed: 14, alreadySettled: 0, quarantined: 0 })
        assert.deepStrictEqual(pagedStore, singleStore)
        // The stored reasons, and the cursor moved back below the first requeued row.
        const byId = new Map(pagedStore.outbox.map((r: any) => [r.effect_id, r]))
        assert.deepStrictEqual(
          [byId.get("job:j1").status, byId.get("job:j1").operator_actions, byId.get("job:j1").lease_owner],
          ["cancelled", 1, null]
        )
        assert.deepStrictEqual(JSON.parse(byId.get("job:j0").error), {
          message: Reconcile.processEndedReason,
          code: "process-ended",
          reason: "process-lost"
        })
        assert.strictEqual(byId.get("job:j2").status, "pending")
        assert.strictEqual(
          pagedStore.cursors.find((c: any) => c.reactor === "ahead")!.position,
          byId.get("job:j1").sequence - 1
        )
        assert.strictEqual(pagedStore.receipts.length, ROWS * 2 + 1)
      })
  )
})
