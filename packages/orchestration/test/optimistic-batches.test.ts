/**
 * Batches run optimistically, without a savepoint per command; a command that fails after it wrote
 * (here: its projection throws after its event was inserted) sends the batch back to run isolated,
 * so its partial writes never commit and its neighbours still do. Runs on both stores.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Option } from "effect"
import { Account, Balances } from "../examples/Accounts.js"
import { Engine, Projection } from "../src/index.js"
import { engineLayer, snapshot, waitForQueueDepth } from "./fixtures/harness.js"

// The example projection, except that a deposit of 13 throws after the event row exists.
const Unlucky = Projection.make(Account, {
  name: "account_balances",
  setup: Balances.setup,
  reset: Balances.reset,
  apply: (event, record) =>
    event.type === "account.deposited" && event.amount === 13
      ? Effect.die(new Error("projection bug on 13"))
      : Balances.apply(event, record)
})

const open = (commandId: string) => ({ commandId, type: "account.open", accountId: "acc-1", owner: "ada" })
const deposit = (commandId: string, amount: number) => ({
  commandId,
  type: "account.deposit",
  accountId: "acc-1",
  amount
})

describe("optimistic batches", () => {
  it.effect("a command failing after its writes is rolled back alone; the rest of its batch commits once", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const fibers = yield* Effect.forEach(
        [open("o-1"), deposit("d-1", 5), deposit("d-13", 13), deposit("d-2", 7)],
        (command) => Effect.fork(Effect.exit(engine.dispatchWithReceipt(command)))
      )
      yield* waitForQueueDepth(4)
      yield* engine.activate
      const [opened, first, unlucky, second] = yield* Fiber.joinAll(fibers)
      assert.isTrue(Exit.isSuccess(opened!) && Exit.isSuccess(first!) && Exit.isSuccess(second!))
      assert.isTrue(Exit.isFailure(unlucky!))
      const error = Exit.isFailure(unlucky!) ? Option.getOrUndefined(Cause.failureOption(unlucky.cause)) : undefined
      assert.deepStrictEqual(
        [error?._tag, (error as { stage?: string } | undefined)?.stage],
        ["CommandDefect", "projection"]
      )
      const rows = yield* snapshot
      assert.deepStrictEqual(
        rows.events!.map((e) => (e as { command_id: string }).command_id),
        ["o-1", "d-1", "d-2"]
      )
      assert.deepStrictEqual(rows.receipts!.map((r) => (r as { command_id: string }).command_id).sort(), [
        "d-1",
        "d-2",
        "o-1"
      ])
      assert.strictEqual(Number((rows.account_balances![0] as { balance: number }).balance), 12)
      // Versions stay consecutive: the rolled-back event left no hole in the aggregate's history.
      assert.deepStrictEqual(
        (yield* engine.readEvents({ aggregateId: "acc-1" })).map((e) => e.version),
        [1, 2, 3]
      )
      // One batch from the clients' view (the isolated re-run is inside it).
      assert.strictEqual((yield* engine.stats).transactions, 1)
    }).pipe(
      Effect.provide(engineLayer({ config: { aggregates: [Account], projections: [Unlucky], activation: "manual" } }))
    )
  )

  it.effect("a lone command failing after its writes leaves nothing behind and the next command is served", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(open("o-1"))
      const failed = yield* Effect.exit(engine.dispatchWithReceipt(deposit("d-13", 13)))
      assert.isTrue(Exit.isFailure(failed))
      const next = yield* engine.dispatchWithReceipt(deposit("d-1", 1))
      assert.strictEqual(next.events[0]!.version, 2)
      const rows = yield* snapshot
      assert.deepStrictEqual(
        rows.events!.map((e) => (e as { command_id: string }).command_id),
        ["o-1", "d-1"]
      )
      assert.isFalse(rows.receipts!.some((r) => (r as { command_id: string }).command_id === "d-13"))
    }).pipe(Effect.provide(engineLayer({ config: { aggregates: [Account], projections: [Unlucky] } })))
  )
})
