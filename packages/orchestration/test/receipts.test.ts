import { assert, describe, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Fiber } from "effect"
import { CommandIdConflict, CommandRejected, Engine, StorageFailure, WriteProbe } from "../src/index.js"
import { Account, Balances } from "../examples/Accounts.js"
import { counting } from "./fixtures/counting.js"
import { engineLayer, rowCounts, snapshot, tempDbFile, waitForQueueDepth } from "./fixtures/harness.js"

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

const withCounting = () => {
  const { aggregate, calls } = counting(Account)
  return { layer: engineLayer({ config: { aggregates: [aggregate], projections: [Balances] } }), calls }
}

describe("receipts", () => {
  it.effect("a duplicate id with the same payload returns the stored answer and writes nothing", () => {
    const { layer, calls } = withCounting()
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const first = yield* engine.dispatchWithReceipt(open("c-1"))
      const before = yield* snapshot
      const decided = calls.decide
      const again = yield* engine.dispatchWithReceipt(open("c-1"))
      assert.strictEqual(again.duplicate, true)
      assert.strictEqual(first.duplicate, false)
      assert.deepStrictEqual({ ...again, duplicate: false }, first)
      assert.strictEqual(calls.decide, decided)
      assert.deepStrictEqual(yield* snapshot, before)
    }).pipe(Effect.provide(layer))
  })

  it.effect("the same id with another payload, aggregate or type is a conflict and writes nothing", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(open("c-1"))
      yield* engine.dispatchWithReceipt(deposit("d-1", 10))
      const before = yield* snapshot
      const otherPayload = yield* Effect.flip(engine.dispatchWithReceipt(deposit("d-1", 11)))
      const otherAggregate = yield* Effect.flip(engine.dispatchWithReceipt(deposit("d-1", 10, "acc-2")))
      const otherType = yield* Effect.flip(
        engine.dispatchWithReceipt({ commandId: "d-1", type: "account.withdraw", accountId: "acc-1", amount: 10 })
      )
      for (const error of [otherPayload, otherAggregate, otherType]) {
        assert.instanceOf(error, CommandIdConflict)
        assert.strictEqual((error as CommandIdConflict).commandId, "d-1")
      }
      assert.include(otherPayload.message, "another payload")
      assert.include(otherAggregate.message, "acc-2")
      assert.include(otherType.message, "account.withdraw")
      assert.deepStrictEqual(yield* snapshot, before)
    }).pipe(Effect.provide(engineLayer()))
  )

  it.effect("a rejection is stored and its retry returns it without deciding again", () => {
    const { layer, calls } = withCounting()
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const first = yield* Effect.flip(engine.dispatchWithReceipt(deposit("d-1", 5)))
      assert.instanceOf(first, CommandRejected)
      assert.strictEqual((first as CommandRejected).reason, "not-open")
      assert.strictEqual((first as CommandRejected).duplicate, false)
      const decided = calls.decide
      const counts = yield* rowCounts
      assert.strictEqual(counts.receipts, 1)
      assert.strictEqual(counts.events, 0)
      // Even after the account opens, the retry is answered from the stored rejection.
      yield* engine.dispatchWithReceipt(open("c-1"))
      const retry = yield* Effect.flip(engine.dispatchWithReceipt(deposit("d-1", 5)))
      assert.instanceOf(retry, CommandRejected)
      assert.strictEqual((retry as CommandRejected).reason, "not-open")
      assert.strictEqual((retry as CommandRejected).duplicate, true)
      assert.strictEqual(calls.decide, decided + 1) // only the open was decided
      const receipt = yield* engine.receipt("d-1")
      assert.strictEqual(receipt._tag === "Some" && receipt.value.status, "rejected")
    }).pipe(Effect.provide(layer))
  })

  it.effect("a replayed Stop finds its receipt instead of stopping newer work", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(open("c-1"))
      // A close on an account that is not open decides nothing, like a Stop on an idle thread.
      const idleClose = yield* engine.dispatchWithReceipt({
        commandId: "close-1",
        type: "account.close",
        accountId: "acc-2"
      })
      assert.deepStrictEqual(idleClose.events, [])
      const receipt = yield* engine.receipt("close-1")
      assert.isTrue(receipt._tag === "Some" && receipt.value.status === "accepted")
      // acc-2 is opened afterwards; replaying the old close must not close it.
      yield* engine.dispatchWithReceipt(open("c-2", "acc-2"))
      const before = yield* snapshot
      const replay = yield* engine.dispatchWithReceipt({
        commandId: "close-1",
        type: "account.close",
        accountId: "acc-2"
      })
      assert.strictEqual(replay.duplicate, true)
      assert.strictEqual(replay.sequence, idleClose.sequence)
      assert.deepStrictEqual(yield* snapshot, before)
      const deposit2 = yield* engine.dispatchWithReceipt(deposit("d-2", 3, "acc-2"))
      assert.strictEqual(deposit2.events.length, 1)
    }).pipe(Effect.provide(engineLayer()))
  )

  it.effect("a command that decides no events answers the log head it saw", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const opened = yield* engine.dispatchWithReceipt(open("c-1"))
      const touch = yield* engine.dispatchWithReceipt({ commandId: "t-1", type: "account.touch", accountId: "acc-9" })
      assert.strictEqual(touch.sequence, opened.sequence)
      assert.deepStrictEqual(touch.effectIds, [])
    }).pipe(Effect.provide(engineLayer()))
  )

  it.effect("two dispatches of one id at the same instant give one commit and two identical answers", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(open("c-1"))
      const [a, b] = yield* Effect.all(
        [engine.dispatchWithReceipt(deposit("d-1", 7)), engine.dispatchWithReceipt(deposit("d-1", 7))],
        {
          concurrency: "unbounded"
        }
      )
      assert.deepStrictEqual({ ...a, duplicate: false }, { ...b, duplicate: false })
      assert.deepStrictEqual([a.duplicate, b.duplicate].sort(), [false, true])
      const counts = yield* rowCounts
      assert.strictEqual(counts.events, 2)
      assert.strictEqual(counts.receipts, 2)
    }).pipe(Effect.provide(engineLayer()))
  )

  it.effect("a concurrent duplicate with another payload is a conflict, not a storage error", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      // Parked: the first command waits in the queue, so the second certainly arrives while it is in flight.
      const first = yield* Effect.fork(engine.dispatchWithReceipt(open("c-1")))
      yield* waitForQueueDepth(1)
      const second = yield* Effect.flip(engine.dispatchWithReceipt(open("c-1", "acc-1", "bob")))
      assert.instanceOf(second, CommandIdConflict)
      yield* engine.activate
      const firstAnswer = yield* Fiber.join(first)
      assert.strictEqual(firstAnswer.duplicate, false)
      assert.strictEqual((yield* rowCounts).receipts, 1)
    }).pipe(Effect.provide(engineLayer({ config: { activation: "manual" } })))
  )

  it.effect("the fingerprint is taken before schema defaults, so a default never turns a retry into a conflict", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(open("c-1"))
      const first = yield* engine.dispatchWithReceipt(deposit("d-1", 7))
      const retry = yield* engine.dispatchWithReceipt({
        amount: 7,
        accountId: "acc-1",
        type: "account.deposit",
        commandId: "d-1"
      })
      assert.strictEqual(retry.duplicate, true)
      assert.strictEqual(retry.sequence, first.sequence)
      const withMemo = yield* Effect.flip(engine.dispatchWithReceipt({ ...deposit("d-1", 7), memo: "" }))
      assert.instanceOf(withMemo, CommandIdConflict)
    }).pipe(Effect.provide(engineLayer()))
  )
})

describe("the write probe", () => {
  it.effect("lands on a store that takes writes and leaves nothing behind, however often it runs", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(open("c-1"))
      const before = yield* snapshot
      yield* Effect.all([WriteProbe.probeWrite, WriteProbe.probeWrite, WriteProbe.probeWrite], {
        concurrency: "unbounded"
      })
      assert.deepStrictEqual(yield* snapshot, before)
      assert.isTrue((yield* engine.receipt(WriteProbe.probeCommandId))._tag === "None")
    }).pipe(Effect.provide(engineLayer()))
  )
})

describe("a damaged receipt", () => {
  it.effect("answers its own command with a typed failure; the rest of its batch commits", () => {
    const file = tempDbFile()
    const damage = Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(open("c-1"))
      yield* Effect.flip(engine.dispatchWithReceipt(withdraw("w-bad", 1_000)))
      const sql = yield* SqlClient
      // Cut off, as a torn or hand-edited row would be: an accepted command's effect ids, a rejection.
      yield* sql`UPDATE receipts SET effect_ids = '[{"cut' WHERE command_id = 'c-1'`
      yield* sql`UPDATE receipts SET rejection = '{"reason' WHERE command_id = 'w-bad'`
    }).pipe(Effect.provide(engineLayer({ filename: file })))
    return Effect.gen(function* () {
      yield* damage
      yield* Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const before = yield* snapshot
        // Parked: all three arrive before the processor runs, so they share one batch.
        const retry = yield* Effect.fork(Effect.flip(engine.dispatchWithReceipt(open("c-1"))))
        yield* waitForQueueDepth(1)
        const rejectedRetry = yield* Effect.fork(Effect.flip(engine.dispatchWithReceipt(withdraw("w-bad", 1_000))))
        yield* waitForQueueDepth(2)
        const healthy = yield* Effect.fork(engine.dispatchWithReceipt(open("c-2", "acc-2")))
        yield* waitForQueueDepth(3)
        yield* engine.activate
        // The rest of the batch is served.
        assert.strictEqual((yield* Fiber.join(healthy)).duplicate, false)
        for (const failed of [yield* Fiber.join(retry), yield* Fiber.join(rejectedRetry)]) {
          assert.instanceOf(failed, StorageFailure)
          assert.strictEqual((failed as StorageFailure).reason, "corrupt")
          assert.strictEqual((failed as StorageFailure).operation, "read receipt")
          assert.include((failed as StorageFailure).message, "not JSON")
        }
        // Only the healthy command wrote; the damaged receipts are left as they were for an operator.
        const after = yield* snapshot
        assert.strictEqual(after.receipts!.length, before.receipts!.length + 1)
        assert.deepStrictEqual(
          after.receipts!.filter((r) => (r as { command_id: string }).command_id !== "c-2"),
          before.receipts
        )
        // A different payload under a damaged id is still a conflict: identity is read from plain columns.
        assert.instanceOf(
          yield* Effect.flip(engine.dispatchWithReceipt(open("c-1", "acc-1", "bob"))),
          CommandIdConflict
        )
      }).pipe(Effect.provide(engineLayer({ filename: file, config: { activation: "manual" } })))
    })
  })
})

describe("coalesced rejections", () => {
  it.effect("a rejected command's concurrent twin gets the same rejection marked duplicate", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const first = yield* Effect.fork(Effect.flip(engine.dispatchWithReceipt(deposit("d-1", 5))))
      yield* waitForQueueDepth(1)
      const second = yield* Effect.fork(Effect.flip(engine.dispatchWithReceipt(deposit("d-1", 5))))
      yield* Effect.yieldNow()
      yield* engine.activate
      const [a, b] = [yield* Fiber.join(first), yield* Fiber.join(second)]
      assert.instanceOf(a, CommandRejected)
      assert.instanceOf(b, CommandRejected)
      assert.deepStrictEqual([(a as CommandRejected).duplicate, (b as CommandRejected).duplicate], [false, true])
      assert.strictEqual((b as CommandRejected).message, (a as CommandRejected).message)
      assert.strictEqual((yield* rowCounts).receipts, 1)
    }).pipe(Effect.provide(engineLayer({ config: { activation: "manual" } })))
  )
})
