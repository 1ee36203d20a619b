import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Schema } from "effect"
import {
  Aggregate,
  Decision,
  Engine,
  Reconcile,
  StorageFailure,
  StorageFaults,
  driverError,
  type EngineConfig
} from "../src/index.js"
import * as Outbox from "../src/Outbox.js"
import * as TestStore from "../src/testing/TestStore.js"
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

/** The engine's rows the settlements wrote, in a comparable order. */
const engineSnapshot = Effect.gen(function* () {
  const sql = yield* SqlClient
  return {
    outbox: yield* sql`SELECT * FROM outbox ORDER BY sequence`,
    receipts: yield* sql`SELECT * FROM receipts ORDER BY command_id`,
    events:
      yield* sql`SELECT sequence, event_id, aggregate_id, version, type, payload, command_id FROM events ORDER BY sequence`
  }
})

/** Everything the jobs' settlements wrote, in a comparable order. */
const snapshot = Effect.gen(function* () {
  const sql = yield* SqlClient
  return {
    ...(yield* engineSnapshot),
    jobs: yield* sql`SELECT * FROM job_status ORDER BY effect_id`,
    cursors: yield* sql`SELECT reactor, position FROM reactor_cursors ORDER BY reactor`
  }
})

/**
 * A turn with two tool calls, each in its own lane so both run at once. Like the agents' thread, a
 * call that fails ends the turn: its outcome cancels the other call (a decision's `cancel`).
 */
const TurnEvent = Schema.Union(
  Aggregate.event("turn.started", {}),
  Aggregate.event("turn.heard", { effectId: Schema.String, status: Schema.String })
)
const Turn = Aggregate.make({
  name: "turn",
  commands: { "turn.start": Aggregate.command("turn.start", { turnId: Schema.String }) },
  events: TurnEvent,
  aggregateId: (command) => command.turnId,
  initialState: {},
  evolve: (state) => state,
  decide: (_state, command) =>
    Decision.of<typeof TurnEvent.Type>({
      events: [{ type: "turn.started" }],
      effects: ["a", "b"].map((call) => ({
        id: `call:${command.turnId}:${call}`,
        kind: "tool",
        payload: {},
        lane: `call:${command.turnId}:${call}`
      }))
    }),
  onOutcome: (_state, outcome) =>
    Decision.of<typeof TurnEvent.Type>({
      events: [{ type: "turn.heard", effectId: outcome.effectId, status: outcome.status }],
      cancel:
        outcome.status === "failed" && outcome.effectId.endsWith(":a")
          ? [{ effectId: outcome.effectId.replace(/:a$/, ":b"), reason: "the turn ended" }]
          : []
    })
})
const turnConfig: EngineConfig = { aggregates: [Turn], projections: [], activation: "manual" }
const turnEngine = (filename: string, config: Partial<EngineConfig> = {}) =>
  Engine.layer({ ...turnConfig, ...config }).pipe(Layer.provideMerge(TestStore.layer({ filename })))

const settle = (call: "a" | "b", outcome: Record<string, unknown>) => ({
  commandId: `settle:${call}`,
  effectId: `call:t1:${call}`,
  attempt: 1,
  aggregateType: "turn",
  aggregateId: "t1",
  by: "reactor",
  ...outcome
})
const failA = settle("a", {
  type: "effect.fail",
  error: { message: "disk full", code: "SQLITE_FULL", reason: "storage" }
})
const succeedB = settle("b", { type: "effect.succeed", response: { ok: true } })
const retryB = settle("b", {
  type: "effect.fail",
  error: { message: "try again", reason: "handler" },
  retryAt: 5_000
})

/** Both calls of turn t1 started and claimed by a worker: running at attempt 1. */
const runningCalls = Effect.gen(function* () {
  const engine = yield* Engine.Engine
  yield* engine.activate
  yield* engine.dispatchWithReceipt({ commandId: "start-t1", type: "turn.start", turnId: "t1" })
  const claimed = yield* Outbox.claim({
    kinds: ["tool"],
    owner: "worker",
    now: 0,
    leaseMs: 60_000,
    limit: 10,
    after: 0
  })
  assert.strictEqual(claimed.length, 2)
})

/**
 * The settlements in one batch (one page), and one command per batch: the same answers (these) and
 * the same stores. Returns B's row as the page left it.
 */
const sameAsOneByOne = (commands: ReadonlyArray<unknown>, answers: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const paged = tempDbFile()
    const single = tempDbFile()
    yield* runningCalls.pipe(Effect.provide(turnEngine(paged)))
    yield* runningCalls.pipe(Effect.provide(turnEngine(single)))
    const pagedAnswers = yield* Effect.flatMap(Engine.Engine, (engine) => engine.dispatchManyDuringBoot(commands)).pipe(
      Effect.provide(turnEngine(paged))
    )
    const singleAnswers = yield* Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.activate
      return yield* Effect.forEach(commands, (command) =>
        Effect.exit(engine.dispatchWithReceipt(command, { origin: "internal" }))
      )
    }).pipe(Effect.provide(turnEngine(single, { maxBatch: 1 })))
    const status = (exits: ReadonlyArray<Exit.Exit<unknown, unknown>>) =>
      exits.map((a) => (Exit.isSuccess(a) ? "accepted" : String((a.cause as any).error?.reason)))
    assert.deepStrictEqual(status(singleAnswers), answers)
    assert.deepStrictEqual(status(pagedAnswers), answers)
    const pagedStore = yield* engineSnapshot.pipe(Effect.provide(turnEngine(paged)))
    assert.deepStrictEqual(pagedStore, yield* engineSnapshot.pipe(Effect.provide(turnEngine(single))))
    return pagedStore.outbox.find((r: any) => r.effect_id === "call:t1:b") as any
  })

describe("settlement pages", () => {
  it.effect(
    "a settlement whose aggregate cancels a running sibling makes that sibling's later settle in the same page stale, as one by one",
    () =>
      Effect.gen(function* () {
        const b = yield* sameAsOneByOne([failA, succeedB], ["accepted", "stale-outcome"])
        // Cancelled by the turn; the worker still holds the lease until it says its handler stopped.
        assert.deepStrictEqual([b.status, b.response, b.lease_owner], ["cancelled", null, "worker"])
      })
  )

  it.effect(
    "a cancel of a sibling whose settlement the page has not written yet applies to the row as that settlement left it, as one by one",
    () =>
      Effect.gen(function* () {
        // B's failure sends it back to pending (a retry later); A's failure then cancels it.
        const b = yield* sameAsOneByOne([retryB, failA], ["accepted", "accepted"])
        assert.strictEqual(b.status, "cancelled")
      })
  )

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
