import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Engine, Reconcile, StorageFailure, StorageFaults, driverError } from "../src/index.js"
import { deadProcess as deadProcessWith, jobPolicies, jobsEngine } from "./fixtures/Jobs.js"
import { tempDbFile } from "./fixtures/harness.js"

const ROWS = 40

const deadProcess = deadProcessWith(ROWS)

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

const policies = jobPolicies

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

  it.effect(
    "a reconcile page the store refuses settles none of its rows and fails with the storage error; run again, it settles every row once",
    () =>
      Effect.gen(function* () {
        const file = tempDbFile()
        yield* deadProcess.pipe(Effect.provide(jobsEngine(file)))
        const before = yield* snapshot.pipe(Effect.provide(jobsEngine(file)))
        // A full disk: every receipt write is refused, so no settlement of the page can commit.
        const refusing = { on: true }
        const faults = Layer.succeed(StorageFaults, {
          before: (point) =>
            refusing.on && point === "receipts"
              ? Effect.fail(driverError("SQLITE_FULL", "SQLITE_FULL: injected at receipts"))
              : Effect.void
        })
        // Boot dispatch runs in the caller's fiber: the faults are the whole program's, as in production.
        const failed = yield* Effect.flip(Reconcile.reconcileAfterProcessLoss({ policies })).pipe(
          Effect.provide(jobsEngine(file).pipe(Layer.provideMerge(faults)))
        )
        assert.instanceOf(failed, StorageFailure)
        assert.deepStrictEqual(
          [(failed as StorageFailure).reason, (failed as StorageFailure).code],
          ["disk-full", "SQLITE_FULL"]
        )
        // Nothing of the page was kept: no row moved, no receipt, no event, no read model row.
        assert.deepStrictEqual(yield* snapshot.pipe(Effect.provide(jobsEngine(file))), before)

        refusing.on = false
        const report = yield* Reconcile.reconcileAfterProcessLoss({ policies }).pipe(Effect.provide(jobsEngine(file)))
        assert.deepStrictEqual(report, { requeued: 26, failed: 14, alreadySettled: 0, quarantined: 0 })
        const after = yield* snapshot.pipe(Effect.provide(jobsEngine(file)))
        assert.isTrue(after.outbox.every((r: any) => r.status === "pending" || r.status === "failed"))
        const settled = after.receipts.filter((r: any) => r.command_id.startsWith("reconcile:"))
        assert.deepStrictEqual(
          settled.map((r: any) => r.command_id),
          [...new Set(settled.map((r: any) => r.command_id))]
        )
        assert.strictEqual(settled.length, ROWS)
        assert.isTrue(settled.every((r: any) => r.status === "accepted"))
        // The aggregate was told each time: one event per settled row, and the stored reason shown.
        assert.strictEqual(after.events.filter((e: any) => e.command_id.startsWith("reconcile:")).length, ROWS)
        assert.strictEqual(after.jobs.filter((j: any) => j.detail === Reconcile.processEndedReason).length, 14)
      })
  )
})
