/**
 * Found by a review (2026-12-05; failed before its fix): a follower of one aggregate id read without
 * the commit horizon, on the grounds that one aggregate's sequences commit in order; but the read
 * filters by aggregate_id only, and two aggregate types sharing an id are two aggregates whose writers
 * are not ordered. A job 'k' held open below an account 'k' that committed was skipped for good.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Stream } from "effect"
import { Account, Balances } from "../../examples/Accounts.js"
import { Engine } from "../../src/index.js"
import * as TestStore from "../../src/testing/TestStore.js"
import { tempDbFile } from "../fixtures/harness.js"
import { Job } from "../fixtures/Jobs.js"
import { holdAt, wait } from "./sessions.js"

const config = { aggregates: [Account, Job], projections: [Balances] }

describe("followEvents({ aggregateId }) across processes", () => {
  it.scoped("a job 'k' committing late below account 'k' is delivered, not skipped", () =>
    Effect.gen(function* () {
      const file = tempDbFile()
      // Process A, whose dispatch transaction can be held open before its COMMIT; process B.
      const storeA = yield* Layer.build(TestStore.layer({ filename: file }))
      const hold = holdAt("dispatch.before-commit", yield* Effect.provide(SqlClient, storeA))
      const engineA = yield* Effect.provide(
        Engine.Engine,
        yield* Layer.build(
          Engine.layer(config).pipe(Layer.provide(hold.layer), Layer.provide(Layer.succeedContext(storeA)))
        )
      )
      const engineB = yield* Effect.provide(
        Engine.Engine,
        yield* Layer.build(Engine.layer(config).pipe(Layer.provideMerge(TestStore.layer({ filename: file }))))
      )
      yield* Effect.addFinalizer(() => hold.release)

      const seenOfK: Array<string> = []
      yield* Effect.forkScoped(
        Stream.runForEach(engineB.followEvents({ aggregateId: "k" }), (e) =>
          Effect.sync(() => seenOfK.push(`${e.sequence}:${e.type}`))
        )
      )
      // Process A: job 'k' submitted, its transaction held open after its events took their sequence.
      yield* hold.arm
      const first = yield* Effect.fork(
        engineA.dispatchWithReceipt({ commandId: "submit-k", type: "job.submit", jobId: "k", kind: "work.safe" })
      )
      yield* hold.held
      // Process B: account 'k' opened, committed above A's open row; then A commits.
      const opened = yield* engineB.dispatchWithReceipt({
        commandId: "open-k",
        type: "account.open",
        accountId: "k",
        owner: "o"
      })
      yield* hold.release
      const submitted = yield* Fiber.join(first)
      assert.isBelow(submitted.sequence, opened.sequence)
      const deposited = yield* engineB.dispatchWithReceipt({
        commandId: "dep-k",
        type: "account.deposit",
        accountId: "k",
        amount: 1
      })
      const deadline = Date.now() + 10_000
      while (seenOfK.length < 3 && Date.now() < deadline) yield* wait(20)
      // What the table holds for aggregate id 'k', in sequence order, delivered each once (never a skip).
      const all = (yield* engineB.readEvents({ aggregateId: "k" })).map((e) => `${e.sequence}:${e.type}`)
      assert.deepStrictEqual(all, [
        `${submitted.sequence}:job.submitted`,
        `${opened.sequence}:account.opened`,
        `${deposited.sequence}:account.deposited`
      ])
      assert.deepStrictEqual(seenOfK, all)
    })
  )
})
