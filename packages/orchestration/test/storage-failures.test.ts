import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, TestClock } from "effect"
import {
  CommandRejected,
  type EffectActionRefused,
  EffectFailure,
  Engine,
  Reconcile,
  StorageFailure,
  StorageFaults,
  WriteProbe,
  driverError,
  type WritePoint
} from "../src/index.js"
import { engineLayer, rowCounts, snapshot, tempDbFile, waitForQueueDepth } from "./fixtures/harness.js"
import * as Outbox from "../src/Outbox.js"
import { deadProcess, jobPolicies, jobsEngine, jobStatus, submit } from "./fixtures/Jobs.js"
import { eventually, gated, scriptedHandler, settle, stack, testReactor } from "./fixtures/reactors.js"

const open = (commandId: string, accountId = "acc-1", owner = "ada") => ({
  commandId,
  type: "account.open",
  accountId,
  owner
})
const deposit = (commandId: string, amount: number, accountId = "acc-1") => ({
  commandId,
  type: "account.deposit",
  accountId,
  amount
})
const withdraw = (commandId: string, amount: number, accountId = "acc-1") => ({
  commandId,
  type: "account.withdraw",
  accountId,
  amount
})

/** A fault layer the test arms: the next write at `point` fails with the driver code given. */
const armedFaults = () => {
  const armed: { point: WritePoint | undefined; code: string } = { point: undefined, code: "SQLITE_FULL" }
  const layer = Layer.succeed(StorageFaults, {
    before: (point) =>
      point === armed.point ? Effect.fail(driverError(armed.code, `${armed.code}: injected at ${point}`)) : Effect.void
  })
  return { armed, layer }
}

/** Caps the database at its current size plus `extraPages`, like a disk with little room left. */
const capDatabase = (extraPages: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const [row] = yield* sql<{ page_count: number }>`PRAGMA page_count`
    yield* sql.unsafe(`PRAGMA max_page_count = ${Number(row!.page_count) + extraPages}`)
  })

const uncap = Effect.flatMap(SqlClient, (sql) => sql.unsafe("PRAGMA max_page_count = 1073741823"))

describe("atomicity: a refused write rolls back the whole command", () => {
  for (const point of ["events", "projections", "outbox", "receipts"] as const) {
    it.effect(`a failure at ${point} leaves all four tables unchanged and the cache unadvanced`, () => {
      const { armed, layer } = armedFaults()
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(open("c-0", "acc-0"))
        yield* engine.dispatchWithReceipt(open("c-1"))
        const before = yield* snapshot
        armed.point = point
        // An open writes an event, a projection row, an outbox row and a receipt.
        const failed = yield* Effect.flip(engine.dispatchWithReceipt(open("c-2", "acc-2")))
        assert.instanceOf(failed, StorageFailure)
        assert.strictEqual((failed as StorageFailure).reason, "disk-full")
        assert.strictEqual((failed as StorageFailure).code, "SQLITE_FULL")
        // Deposits write no outbox row; for the other points a deposit fails the same way.
        if (point !== "outbox") {
          const failedDeposit = yield* Effect.flip(engine.dispatchWithReceipt(deposit("d-1", 10)))
          assert.instanceOf(failedDeposit, StorageFailure)
        }
        armed.point = undefined
        assert.deepStrictEqual(yield* snapshot, before)
        if (point !== "outbox") {
          // Had the cache advanced, the balance would be 10 and this withdrawal would pass.
          const refused = yield* Effect.flip(engine.dispatchWithReceipt(withdraw("w-1", 10)))
          assert.instanceOf(refused, CommandRejected)
          assert.strictEqual((refused as CommandRejected).reason, "insufficient-funds")
        }
        // The next command succeeds, and the failed id can be retried.
        const retried = yield* engine.dispatchWithReceipt(open("c-2", "acc-2"))
        assert.strictEqual(retried.duplicate, false)
        assert.strictEqual(retried.events.length, 1)
      }).pipe(Effect.provide(engineLayer().pipe(Layer.provide(layer))))
    })
  }

  it.effect("an injected I/O error is a StorageFailure with reason io-error", () => {
    const { armed, layer } = armedFaults()
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      armed.point = "events"
      armed.code = "SQLITE_IOERR_WRITE"
      const failed = yield* Effect.flip(engine.dispatchWithReceipt(open("c-1")))
      assert.instanceOf(failed, StorageFailure)
      assert.strictEqual((failed as StorageFailure).reason, "io-error")
      assert.deepStrictEqual(yield* rowCounts, { events: 0, receipts: 0, outbox: 0, account_balances: 0 })
    }).pipe(Effect.provide(engineLayer().pipe(Layer.provide(layer))))
  })
})

describe("a real SQLITE_FULL (max_page_count)", () => {
  it.effect("fails the command with disk-full; nothing unrecorded is reported accepted; raising the cap heals", () => {
    const file = tempDbFile()
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(open("c-1"))
      const before = yield* snapshot
      yield* capDatabase(4)
      const huge = "x".repeat(400_000)
      const failed = yield* Effect.flip(engine.dispatchWithReceipt(open("c-2", "acc-2", huge)))
      assert.instanceOf(failed, StorageFailure)
      assert.strictEqual((failed as StorageFailure).reason, "disk-full")
      assert.strictEqual((failed as StorageFailure).code, "SQLITE_FULL")
      assert.deepStrictEqual(yield* snapshot, before)
      assert.isTrue((yield* engine.receipt("c-2"))._tag === "None")
      yield* uncap
      const healed = yield* engine.dispatchWithReceipt(open("c-2", "acc-2", huge))
      assert.strictEqual(healed.duplicate, false)
      assert.strictEqual((yield* rowCounts).events, 2)
    }).pipe(Effect.provide(engineLayer({ filename: file })))
  })

  it.effect(
    "group commit: a good, a rejected and a storage-failing command in one batch each get their own answer",
    () => {
      const file = tempDbFile()
      const seed = Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(open("c-1"))
      }).pipe(Effect.provide(engineLayer({ filename: file })))
      const batch = Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* capDatabase(6)
        // Parked: the three commands queue up and the processor takes them as one batch.
        const good = yield* Effect.fork(Effect.either(engine.dispatchWithReceipt(deposit("d-1", 5))))
        const rejected = yield* Effect.fork(Effect.either(engine.dispatchWithReceipt(withdraw("w-1", 1_000))))
        const tooBig = yield* Effect.fork(
          Effect.either(engine.dispatchWithReceipt(open("c-2", "acc-2", "x".repeat(400_000))))
        )
        yield* waitForQueueDepth(3)
        yield* engine.activate
        const [goodAnswer, rejectedAnswer, tooBigAnswer] = yield* Fiber.joinAll([good, rejected, tooBig])
        const stats = yield* engine.stats
        // One batch was tried and abandoned on the storage error, then re-run command by command.
        assert.strictEqual(stats.abandonedBatches, 1)
        assert.isTrue(goodAnswer!._tag === "Right" && goodAnswer!.right.events.length === 1)
        assert.isTrue(rejectedAnswer!._tag === "Left" && rejectedAnswer!.left._tag === "CommandRejected")
        assert.isTrue(tooBigAnswer!._tag === "Left" && tooBigAnswer!.left._tag === "StorageFailure")
        if (tooBigAnswer!._tag === "Left" && tooBigAnswer!.left._tag === "StorageFailure") {
          assert.strictEqual(tooBigAnswer!.left.reason, "disk-full")
        }
      }).pipe(Effect.provide(engineLayer({ filename: file, config: { activation: "manual" } })))
      // Reopen the file: what was answered accepted is on disk, and only that.
      const check = Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const sql = yield* SqlClient
        const receipts = yield* sql<{
          command_id: string
          status: string
        }>`SELECT command_id, status FROM receipts ORDER BY command_id`
        assert.deepStrictEqual(
          receipts.map((r) => [r.command_id, r.status]),
          [
            ["c-1", "accepted"],
            ["d-1", "accepted"],
            ["w-1", "rejected"]
          ]
        )
        const events = yield* sql<{ command_id: string }>`SELECT command_id FROM events ORDER BY sequence`
        assert.deepStrictEqual(
          events.map((e) => e.command_id),
          ["c-1", "d-1"]
        )
        const retry = yield* engine.dispatchWithReceipt(deposit("d-1", 5))
        assert.strictEqual(retry.duplicate, true)
      }).pipe(Effect.provide(engineLayer({ filename: file })))
      return Effect.all([seed, batch, check], { discard: true })
    }
  )
})

describe("the write probe", () => {
  it.effect(
    "is refused with disk-full while the store has no room to grow, lands once it has, and leaves no receipt",
    () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(open("c-1"))
        const before = yield* snapshot
        // A migration that rebuilds a table leaves free pages, which a write reuses without growing the
        // file: compact first, so the store truly has no room.
        yield* Effect.flatMap(SqlClient, (sql) => sql.unsafe("VACUUM"))
        yield* capDatabase(0)
        const refused = yield* Effect.flip(WriteProbe.probeWrite)
        assert.deepStrictEqual([refused.reason, refused.code], ["disk-full", "SQLITE_FULL"])
        yield* uncap
        yield* WriteProbe.probeWrite
        yield* WriteProbe.probeWrite
        assert.deepStrictEqual(yield* snapshot, before)
        assert.isTrue((yield* engine.receipt(WriteProbe.probeCommandId))._tag === "None")
      }).pipe(Effect.provide(engineLayer({ filename: tempDbFile() })))
  )
})

// SQLite-only (a real SQLITE_FULL via max_page_count); moved here from reconcile-storage so the
// PostgreSQL conformance run can include that file.
describe("a settle refused by the store", () => {
  it.effect(
    "a real SQLITE_FULL on the outcome ends with the row and the aggregate failed with the storage reason",
    () => {
      const handler = scriptedHandler()
      const performing = gated("x".repeat(300_000))
      handler.behaviors.set("job:j1", performing.behavior)
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const sql = yield* SqlClient
        yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
        yield* eventually(
          Effect.map(Outbox.find("job:j1"), (r) => r?.status === "running"),
          "claimed"
        )
        const [pages] = yield* sql<{ page_count: number }>`PRAGMA page_count`
        yield* sql.unsafe(`PRAGMA max_page_count = ${Number(pages!.page_count)}`)
        // The effect answers 300 kB: recording it needs pages the store will not give.
        yield* performing.open
        for (let i = 0; i < 5; i++) {
          yield* TestClock.adjust("1 second")
          yield* settle
          // Never "succeeded" with a missing result: the row is still running, or failed with the refusal.
          assert.notStrictEqual((yield* Outbox.find("job:j1"))!.status, "succeeded")
        }
        yield* sql.unsafe("PRAGMA max_page_count = 1073741823")
        yield* TestClock.adjust("10 seconds")
        yield* eventually(
          Effect.map(Outbox.find("job:j1"), (r) => r?.status === "failed"),
          "the refusal became the outcome"
        )
        const row = (yield* Outbox.find("job:j1"))!
        assert.deepStrictEqual(row.error, { message: "storage: SQLITE_FULL", code: "SQLITE_FULL", reason: "storage" })
        assert.deepStrictEqual(yield* jobStatus("job:j1"), { status: "failed", detail: "storage: SQLITE_FULL" })
        // The job is terminal, never "succeeded" with a missing result, and the store takes new work.
        yield* engine.dispatchWithReceipt(submit("j2", "work.safe"))
        yield* eventually(
          Effect.map(Outbox.find("job:j2"), (r) => r?.status === "succeeded"),
          "next job"
        )
      }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
    }
  )
})

describe("an operator retry after the store refused a performed effect's outcome", () => {
  /** The store refuses the first write of j1's first outcome (a full disk for a moment). */
  const refusingFirstOutcome = () => {
    const refusing = { left: 1 }
    return Layer.succeed(StorageFaults, {
      before: (point, commandId) =>
        Effect.suspend(() => {
          if (point !== "receipts" || !commandId.startsWith("outcome:job:j1#1") || refusing.left === 0)
            return Effect.void
          refusing.left--
          return Effect.fail(driverError("SQLITE_FULL", "SQLITE_FULL: injected at receipts"))
        })
    })
  }
  const refusingFirstOutcomeStack = (handler: ReturnType<typeof scriptedHandler>) =>
    stack([testReactor(handler.handle)], { filename: tempDbFile() }).pipe(Layer.provide(refusingFirstOutcome()))
  const retry = (commandId: string) => ({
    type: "effect.retry",
    commandId,
    effectId: "job:j1",
    attempt: 1,
    aggregateType: "job",
    aggregateId: "j1",
    by: "operator"
  })
  const performedThenRefused = Effect.gen(function* () {
    for (let i = 0; i < 5; i++) {
      yield* settle
      yield* TestClock.adjust("1 second")
    }
    yield* eventually(
      Effect.map(Outbox.find("job:j1"), (r) => r?.status === "failed"),
      "the refusal became the outcome"
    )
  })

  it.effect(
    "a process-bound effect is refused (may-have-taken-effect): it was performed, and is never performed twice",
    () => {
      const handler = scriptedHandler()
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(submit("j1", "work.bound"))
        yield* performedThenRefused
        assert.deepStrictEqual(handler.performed, ["job:j1#1"])
        const row = (yield* Outbox.find("job:j1"))!
        assert.deepStrictEqual(row.error, {
          message: "storage: SQLITE_FULL; the effect was performed (succeeded), but the store refused its outcome",
          code: "performed-not-recorded",
          reason: "storage"
        })
        const refused = yield* Effect.flip(engine.dispatchWithReceipt(retry("op-retry-1"), { origin: "internal" }))
        assert.strictEqual(refused._tag, "EffectActionRefused")
        assert.strictEqual((refused as EffectActionRefused).reason, "may-have-taken-effect")
        for (let i = 0; i < 3; i++) {
          yield* settle
          yield* TestClock.adjust("1 second")
        }
        assert.deepStrictEqual(handler.performed, ["job:j1#1"])
        assert.strictEqual((yield* Outbox.find("job:j1"))!.status, "failed")
      }).pipe(Effect.provide(refusingFirstOutcomeStack(handler)))
    }
  )

  it.effect("a process-bound effect whose refused outcome was a failure is retried, as a recorded failure is", () => {
    const handler = scriptedHandler()
    // The handler failed (retryably: its kind's policy would have tried again); nothing says it took effect.
    handler.behaviors.set("job:j1", () => Effect.fail(new EffectFailure({ message: "upstream 503", retryable: true })))
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("j1", "work.bound"))
      yield* performedThenRefused
      assert.deepStrictEqual((yield* Outbox.find("job:j1"))!.error, {
        message: "storage: SQLITE_FULL",
        code: "SQLITE_FULL",
        reason: "storage"
      })
      handler.behaviors.delete("job:j1")
      yield* engine.dispatchWithReceipt(retry("op-retry-1"), { origin: "internal" })
      yield* eventually(
        Effect.map(Outbox.find("job:j1"), (r) => r?.status === "succeeded"),
        "performed again"
      )
    }).pipe(Effect.provide(refusingFirstOutcomeStack(handler)))
  })

  it.effect("a replay-safe effect is retried: performing it again is safe", () => {
    const handler = scriptedHandler()
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
      yield* performedThenRefused
      assert.deepStrictEqual((yield* Outbox.find("job:j1"))!.error, {
        message: "storage: SQLITE_FULL",
        code: "SQLITE_FULL",
        reason: "storage"
      })
      yield* engine.dispatchWithReceipt(retry("op-retry-1"), { origin: "internal" })
      yield* eventually(
        Effect.map(Outbox.find("job:j1"), (r) => r?.status === "succeeded"),
        "performed again"
      )
      assert.deepStrictEqual(handler.performed, ["job:j1#1", "job:j1#2"])
    }).pipe(Effect.provide(refusingFirstOutcomeStack(handler)))
  })
})

describe("a reconcile page refused by a real SQLITE_FULL (max_page_count)", () => {
  it.effect(
    "fails with the storage error, leaves no row settled without its receipt and event, and settles every row once with room again",
    () => {
      const file = tempDbFile()
      const ROWS = 300
      const settled = Effect.gen(function* () {
        const sql = yield* SqlClient
        return yield* sql<{
          status: string
          n: number
        }>`SELECT status, COUNT(*) AS n FROM outbox GROUP BY status ORDER BY status`
      })
      const reconcileReceipts = Effect.flatMap(
        SqlClient,
        (sql) => sql<{ command_id: string }>`SELECT command_id FROM receipts WHERE command_id LIKE 'reconcile:%'`
      )
      const reconcileEvents = Effect.flatMap(
        SqlClient,
        (sql) => sql<{ command_id: string }>`SELECT command_id FROM events WHERE command_id LIKE 'reconcile:%'`
      )
      return Effect.gen(function* () {
        yield* deadProcess(ROWS).pipe(Effect.provide(jobsEngine(file)))
        yield* Effect.gen(function* () {
          yield* capDatabase(0)
          const failed = yield* Effect.flip(Reconcile.reconcileAfterProcessLoss({ policies: jobPolicies }))
          assert.instanceOf(failed, StorageFailure)
          assert.deepStrictEqual(
            [(failed as StorageFailure).reason, (failed as StorageFailure).code],
            ["disk-full", "SQLITE_FULL"]
          )
          // The page's transaction was refused, and the processor re-ran its settlements one per
          // transaction until the disk refused again: a row is either still running, or settled with
          // its receipt and its event; never settled without them, never lost.
          const running = (yield* settled).find((r) => r.status === "running")
          const settledBefore = ROWS - Number(running?.n ?? 0)
          assert.isBelow(settledBefore, ROWS)
          assert.strictEqual((yield* reconcileReceipts).length, settledBefore)
          assert.strictEqual((yield* reconcileEvents).length, settledBefore)
          yield* uncap
          const report = yield* Reconcile.reconcileAfterProcessLoss({ policies: jobPolicies })
          assert.strictEqual(report.requeued + report.failed, ROWS - settledBefore)
          assert.deepStrictEqual([report.alreadySettled, report.quarantined], [0, 0])
          assert.deepStrictEqual(
            (yield* settled).map((r) => [r.status, Number(r.n)]),
            [
              ["failed", 100],
              ["pending", 200]
            ]
          )
          const receipts = (yield* reconcileReceipts).map((r) => r.command_id)
          assert.strictEqual(new Set(receipts).size, ROWS)
          assert.strictEqual(receipts.length, ROWS)
          assert.strictEqual((yield* reconcileEvents).length, ROWS)
        }).pipe(Effect.provide(jobsEngine(file)))
      })
    }
  )
})
