/**
 * A read model that refuses a row (a unique or primary-key violation) is a defect of the command
 * that wrote it, never a storage failure: the disk is healthy, so only that command fails, with the
 * constraint named, and its batch commits. A real storage failure is the store's, never one
 * command's: the batch is abandoned and its commands run again alone. Runs on both stores.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Layer, Option } from "effect"
import { Account, Balances } from "../examples/Accounts.js"
import {
  CommandDefect,
  driverError,
  Engine,
  Projection,
  StorageFailure,
  StorageFaults,
  type WritePoint
} from "../src/index.js"
import { testStoreKind } from "../src/testing/TestStore.js"
import { engineLayer, waitForQueueDepth } from "./fixtures/harness.js"

// A second read model keyed by the amount: a second deposit of the same amount violates its key.
const DepositAmounts = Projection.make(Account, {
  name: "deposit_amounts",
  eventTypes: ["account.deposited"],
  setup: Effect.flatMap(SqlClient, (sql) =>
    Effect.asVoid(
      sql`CREATE TABLE IF NOT EXISTS deposit_amounts (amount INTEGER PRIMARY KEY, account_id TEXT NOT NULL)`
    )
  ),
  reset: Effect.flatMap(SqlClient, (sql) => Effect.asVoid(sql`DELETE FROM deposit_amounts`)),
  apply: (event, record) =>
    Effect.flatMap(SqlClient, (sql) =>
      event.type === "account.deposited"
        ? Effect.asVoid(
            sql`INSERT INTO deposit_amounts ${sql.insert({ amount: event.amount, account_id: record.aggregateId })}`
          )
        : Effect.void
    )
})

// A projection whose deposit of 13 has a bug (it throws): it sends an optimistic batch to run isolated.
const Unlucky = Projection.make(Account, {
  name: "unlucky",
  eventTypes: ["account.deposited"],
  setup: Effect.void,
  reset: Effect.void,
  apply: (event) =>
    event.type === "account.deposited" && event.amount === 13
      ? Effect.die(new Error("projection bug on 13"))
      : Effect.void
})

const open = (commandId: string) => ({ commandId, type: "account.open", accountId: "acc-1", owner: "ada" })
const deposit = (commandId: string, amount: number) => ({
  commandId,
  type: "account.deposit",
  accountId: "acc-1",
  amount
})

const failureOf = <A, E>(exit: Exit.Exit<A, E>) =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined

/** What each store names the violated key. */
const expectedConstraint = testStoreKind() === "postgres" ? "deposit_amounts_pkey" : "deposit_amounts.amount"

const committedCommands = Effect.flatMap(SqlClient, (sql) =>
  Effect.map(sql<{ command_id: string }>`SELECT command_id FROM events ORDER BY sequence`, (rows) =>
    rows.map((r) => r.command_id)
  )
)

/** Refuses the write at `point` for the given command, once, as the store would (disk full, I/O error). */
const faultOnce = (point: WritePoint, commandId: string, code: string) => {
  const state = { fired: 0 }
  const layer = Layer.succeed(StorageFaults, {
    before: (at, id) =>
      Effect.suspend(() => {
        if (at !== point || id !== commandId || state.fired > 0) return Effect.void
        state.fired++
        return Effect.fail(driverError(code, `${code}: injected at ${point}`))
      })
  })
  return { state, layer }
}

describe("a constraint violation in a projection", () => {
  it.effect("fails only its command, as a CommandDefect naming the constraint; the rest of its batch commits", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const fibers = yield* Effect.forEach(
        [open("o-1"), deposit("d-1", 5), deposit("d-dup", 5), deposit("d-2", 7)],
        (command) => Effect.fork(Effect.exit(engine.dispatchWithReceipt(command)))
      )
      yield* waitForQueueDepth(4)
      yield* engine.activate
      const [opened, first, dup, second] = yield* Fiber.joinAll(fibers)
      assert.isTrue(Exit.isSuccess(opened!) && Exit.isSuccess(first!) && Exit.isSuccess(second!))
      const error = failureOf(dup!)
      assert.instanceOf(error, CommandDefect, JSON.stringify(error))
      const defect = error as CommandDefect
      assert.deepStrictEqual(
        [defect.commandId, defect.stage, defect.constraint],
        ["d-dup", "projection", expectedConstraint]
      )
      assert.include(defect.message, expectedConstraint)
      // Not a storage failure: nothing was abandoned, and the violating command left nothing behind.
      assert.strictEqual((yield* engine.stats).abandonedBatches, 0)
      assert.deepStrictEqual(yield* committedCommands, ["o-1", "d-1", "d-2"])
      // A lone violating command gets the same answer, and the store takes the next one.
      const alone = yield* Effect.exit(engine.dispatchWithReceipt(deposit("d-dup-2", 7)))
      assert.strictEqual((failureOf(alone) as CommandDefect | undefined)?.constraint, expectedConstraint)
      assert.strictEqual((yield* engine.dispatchWithReceipt(deposit("d-3", 9))).events.length, 1)
    }).pipe(
      Effect.provide(
        engineLayer({
          config: { aggregates: [Account], projections: [Balances, DepositAmounts], activation: "manual" }
        })
      )
    )
  )

  for (const [reason, code] of [
    ["disk-full", testStoreKind() === "postgres" ? "53100" : "SQLITE_FULL"],
    ["io-error", "SQLITE_IOERR_WRITE"]
  ] as const) {
    it.effect(`a refused projection write (${code}) is still a storage failure (${reason})`, () => {
      const faults = faultOnce("projections", "d-1", code)
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(open("o-1"))
        const failed = failureOf(yield* Effect.exit(engine.dispatchWithReceipt(deposit("d-1", 5))))
        assert.instanceOf(failed, StorageFailure, JSON.stringify(failed))
        assert.deepStrictEqual([(failed as StorageFailure).reason, (failed as StorageFailure).code], [reason, code])
        assert.deepStrictEqual(yield* committedCommands, ["o-1"])
      }).pipe(
        Effect.provide(
          engineLayer({ config: { aggregates: [Account], projections: [Balances, DepositAmounts] } }).pipe(
            Layer.provide(faults.layer)
          )
        )
      )
    })
  }
})

describe("a storage failure inside a command's savepoint", () => {
  it.effect(
    "abandons the whole batch, even an isolated one, and its commands run again alone: the failure is never charged to one command",
    () => {
      const faults = faultOnce("events", "d-io", testStoreKind() === "postgres" ? "53100" : "SQLITE_FULL")
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        // d-13's projection bug sends the batch to run with a savepoint per command; there, the store
        // refuses d-io's write. The store may have ended the whole transaction, so no savepoint is trusted.
        const fibers = yield* Effect.forEach(
          [open("o-1"), deposit("d-1", 5), deposit("d-13", 13), deposit("d-io", 7)],
          (command) => Effect.fork(Effect.exit(engine.dispatchWithReceipt(command)))
        )
        yield* waitForQueueDepth(4)
        yield* engine.activate
        const [opened, first, unlucky, refused] = yield* Fiber.joinAll(fibers)
        assert.strictEqual(faults.state.fired, 1)
        assert.strictEqual((yield* engine.stats).abandonedBatches, 1)
        assert.isTrue(Exit.isSuccess(opened!) && Exit.isSuccess(first!))
        assert.strictEqual(failureOf(unlucky!)?._tag, "CommandDefect")
        // Run alone, d-io met a store that takes writes again: its answer is its own, accepted.
        assert.isTrue(Exit.isSuccess(refused!), JSON.stringify(failureOf(refused!)))
        assert.deepStrictEqual(yield* committedCommands, ["o-1", "d-1", "d-io"])
      }).pipe(
        Effect.provide(
          engineLayer({
            config: { aggregates: [Account], projections: [Balances, Unlucky], activation: "manual" }
          }).pipe(Layer.provide(faults.layer))
        )
      )
    }
  )
})
