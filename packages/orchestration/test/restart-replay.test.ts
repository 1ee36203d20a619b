import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import { CommandRejected, Engine } from "../src/index.js"
import { engineLayer, rowCounts, tempDbFile } from "./fixtures/harness.js"

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

describe("restart", () => {
  it.effect(
    "after close and reopen, duplicates are answered from receipts, state is rebuilt, sequences continue",
    () => {
      const file = tempDbFile()
      const firstRun = Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const answers = [
          yield* engine.dispatchWithReceipt(open("c-1")),
          yield* engine.dispatchWithReceipt(deposit("d-1", 30)),
          yield* engine.dispatchWithReceipt(withdraw("w-1", 5))
        ]
        const rejected = yield* Effect.flip(engine.dispatchWithReceipt(withdraw("w-2", 1_000)))
        return { answers, rejected }
      }).pipe(Effect.provide(engineLayer({ filename: file })))

      return Effect.gen(function* () {
        const { answers, rejected } = yield* firstRun
        yield* Effect.gen(function* () {
          const engine = yield* Engine.Engine
          for (const answer of answers) {
            const again = yield* engine.dispatchWithReceipt(
              answer.commandId === "c-1"
                ? open("c-1")
                : answer.commandId === "d-1"
                  ? deposit("d-1", 30)
                  : withdraw("w-1", 5)
            )
            assert.deepStrictEqual(again, { ...answer, duplicate: true })
          }
          const rejectedAgain = yield* Effect.flip(engine.dispatchWithReceipt(withdraw("w-2", 1_000)))
          assert.instanceOf(rejectedAgain, CommandRejected)
          const { commandId, reason, message, aggregateId } = rejected as CommandRejected
          const again = rejectedAgain as CommandRejected
          assert.deepStrictEqual(
            [again.commandId, again.reason, again.message, again.aggregateId, again.duplicate],
            [commandId, reason, message, aggregateId, true]
          )
          // The balance (25) was rebuilt from the log: 26 is refused, 25 passes.
          const tooMuch = yield* Effect.flip(engine.dispatchWithReceipt(withdraw("w-3", 26)))
          assert.strictEqual((tooMuch as CommandRejected).reason, "insufficient-funds")
          const next = yield* engine.dispatchWithReceipt(withdraw("w-4", 25))
          assert.strictEqual(next.sequence, answers.at(-1)!.sequence + 1)
          assert.strictEqual(next.events[0]!.version, 4)
          const sql = yield* SqlClient
          const [balance] = yield* sql<{
            balance: number
          }>`SELECT balance FROM account_balances WHERE account_id = 'acc-1'`
          assert.strictEqual(Number(balance!.balance), 0)
        }).pipe(Effect.provide(engineLayer({ filename: file })))
      })
    }
  )
})

/** A scripted run with time passing between commands, as a replay test drives it. */
const script = Effect.gen(function* () {
  const engine = yield* Engine.Engine
  const answers = []
  for (let i = 0; i < 5; i++) {
    yield* TestClock.adjust("1 minute")
    answers.push(yield* engine.dispatchWithReceipt(open(`open-${i}`, `acc-${i}`, `owner-${i}`)))
    yield* TestClock.adjust("10 seconds")
    answers.push(yield* engine.dispatchWithReceipt(deposit(`dep-${i}`, 10 * (i + 1), `acc-${i}`)))
    if (i % 2 === 0) answers.push(yield* engine.dispatchWithReceipt(withdraw(`wd-${i}`, 5, `acc-${i}`)))
    if (i === 3)
      answers.push(
        yield* engine.dispatchWithReceipt({ commandId: `close-${i}`, type: "account.close", accountId: `acc-${i}` })
      )
  }
  return answers
})

const projectionRows = Effect.flatMap(SqlClient, (sql) => sql`SELECT * FROM account_balances ORDER BY account_id`)

describe("replay under TestClock", () => {
  it.effect("projections rebuilt from the log equal the originals row for row", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* script
      const original = yield* projectionRows
      assert.strictEqual(original.length, 5)
      const applied = yield* engine.rebuildProjections
      assert.strictEqual(applied, (yield* rowCounts).events)
      assert.deepStrictEqual(yield* projectionRows, original)
    }).pipe(Effect.provide(engineLayer()))
  )

  it.effect("the same script on a fresh store decides the same events at the same times", () =>
    Effect.gen(function* () {
      const first = yield* script.pipe(Effect.provide(engineLayer()))
      // A fresh TestClock: the second run starts at time 0 again.
      const second = yield* script.pipe(Effect.provide(engineLayer().pipe(Layer.provide(TestClock.defaultTestClock))))
      assert.deepStrictEqual(second, first)
      const opened = first.find((a) => a.commandId === "open-2")!
      assert.deepStrictEqual(opened.events[0]!.payload, {
        type: "account.opened",
        owner: "owner-2",
        at: opened.events[0]!.occurredAt
      })
      assert.strictEqual(opened.events[0]!.occurredAt, 3 * 70_000 + 2 * 0 - 10_000)
    })
  )
})
