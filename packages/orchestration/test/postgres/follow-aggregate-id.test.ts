/**
 * Found by a review (2026-12-05; failed before its fix): a follower of one aggregate id reads without the commit horizon, on the
 * grounds that one aggregate's sequences commit in order, but the read filters by aggregate_id only:
 * two aggregate TYPES sharing an id are two aggregates whose writers are not ordered.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Stream } from "effect"
import { Engine, FaultPoints } from "../../src/index.js"
import { Account, Balances } from "../../examples/Accounts.js"
import * as TestStore from "../../src/testing/TestStore.js"
import { tempDbFile } from "../fixtures/harness.js"
import { Job } from "../fixtures/Jobs.js"

const wait = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))
const config = { aggregates: [Account, Job], projections: [Balances] }
const engineOver = (file: string) => Engine.layer(config).pipe(Layer.provideMerge(TestStore.layer({ filename: file })))

describe("followEvents({ aggregateId }) across processes", () => {
  it.scoped("a job 'k' committing late below account 'k' is delivered, not skipped", () =>
    Effect.gen(function* () {
      const file = tempDbFile()
      const holding = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      let held = false
      const holdBeforeCommit = Layer.succeed(FaultPoints.FaultPoints, {
        enabled: true,
        hit: (point) =>
          point === "dispatch.before-commit" && !held
            ? Effect.zipRight(
                Effect.sync(() => (held = true)),
                Deferred.succeed(holding, undefined)
              ).pipe(Effect.zipRight(Deferred.await(release)))
            : Effect.void
      })
      const a = yield* Layer.build(engineOver(file).pipe(Layer.provide(holdBeforeCommit)))
      const b = yield* Layer.build(engineOver(file))
      const engineA = yield* Effect.provide(Engine.Engine, a)
      const engineB = yield* Effect.provide(Engine.Engine, b)
      yield* Effect.addFinalizer(() => Deferred.succeed(release, undefined))

      const seenOfK: Array<string> = []
      yield* Effect.forkScoped(
        Stream.runForEach(engineB.followEvents({ aggregateId: "k" }), (e) =>
          Effect.sync(() => seenOfK.push(`${e.sequence}:${e.type}`))
        )
      )
      // Process A: job 'k' submitted, its transaction held open after its events took their sequence.
      const first = yield* Effect.fork(
        engineA.dispatchWithReceipt({ commandId: "submit-k", type: "job.submit", jobId: "k", kind: "work.safe" })
      )
      yield* Deferred.await(holding)
      // Process B: account 'k' opened, committed above A's open row.
      const opened = yield* engineB.dispatchWithReceipt({
        commandId: "open-k",
        type: "account.open",
        accountId: "k",
        owner: "o"
      })
      const until = (done: () => boolean) =>
        Effect.gen(function* () {
          const deadline = Date.now() + 10_000
          while (!done() && Date.now() < deadline) yield* wait(20)
        })
      yield* until(() => seenOfK.length > 0)
      yield* Deferred.succeed(release, undefined)
      const submitted = yield* Fiber.join(first)
      assert.isBelow(submitted.sequence, opened.sequence)
      const deposited = yield* engineB.dispatchWithReceipt({
        commandId: "dep-k",
        type: "account.deposit",
        accountId: "k",
        amount: 1
      })
      yield* until(() => seenOfK.length >= 3)
      yield* wait(300)
      // What the table holds for aggregate id 'k', in sequence order:
      const all = (yield* engineB.readEvents({ aggregateId: "k" })).map((e) => `${e.sequence}:${e.type}`)
      assert.deepStrictEqual(all, [
        `${submitted.sequence}:job.submitted`,
        `${opened.sequence}:account.opened`,
        `${deposited.sequence}:account.deposited`
      ])
      // The follower must have delivered each of them once (a skip is never allowed).
      assert.deepStrictEqual([...seenOfK].sort(), [...all].sort())
    })
  )
})
