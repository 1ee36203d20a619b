import { assert, describe, it } from "@effect/vitest"
import * as Statement from "@effect/sql/Statement"
import { Chunk, Effect, Fiber, Queue, Stream } from "effect"
import { Engine } from "../src/index.js"
import { engineLayer } from "./fixtures/harness.js"
import { settle } from "./fixtures/reactors.js"

describe("reading the log", () => {
  it.effect("followEvents during concurrent dispatch yields sequences 1..N exactly once, in order", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const clients = 8
      const perClient = 25
      // Each client opens its account then deposits: 1 + 24 events per client.
      const total = clients * perClient
      // Start following before anything is written, with part of the log committed mid-catch-up.
      yield* engine.dispatchWithReceipt({ commandId: "open-0", type: "account.open", accountId: "acc-0", owner: "o" })
      const follower = yield* Effect.fork(engine.followEvents({ after: 0 }).pipe(Stream.take(total), Stream.runCollect))
      const client = (c: number) =>
        Effect.gen(function* () {
          if (c !== 0)
            yield* engine.dispatchWithReceipt({
              commandId: `open-${c}`,
              type: "account.open",
              accountId: `acc-${c}`,
              owner: "o"
            })
          for (let i = 1; i < perClient; i++) {
            yield* engine.dispatchWithReceipt({
              commandId: `dep-${c}-${i}`,
              type: "account.deposit",
              accountId: `acc-${c}`,
              amount: i
            })
          }
        })
      yield* Effect.forEach(
        Array.from({ length: clients }, (_, c) => c),
        client,
        { concurrency: "unbounded", discard: true }
      )
      const seen = Chunk.toReadonlyArray(yield* Fiber.join(follower)).map((e) => e.sequence)
      assert.deepStrictEqual(
        seen,
        Array.from({ length: total }, (_, i) => i + 1)
      )
    }).pipe(Effect.provide(engineLayer()))
  )

  it.effect("a follower reads the log once per commit: after a short page it waits for the next hint", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const reads = { counting: false, count: 0 }
      const received = yield* Queue.unbounded<number>()
      const open = (i: number) =>
        engine.dispatchWithReceipt({ commandId: `open-${i}`, type: "account.open", accountId: `acc-${i}`, owner: "o" })
      const follower = yield* Effect.fork(
        engine.followEvents({ after: 0 }).pipe(
          Stream.take(4),
          Stream.runForEach((event) => Queue.offer(received, event.sequence)),
          Statement.withTransformer((statement) =>
            Effect.sync(() => {
              if (reads.counting && statement.compile()[0].startsWith("SELECT * FROM events WHERE sequence >"))
                reads.count += 1
              return statement
            })
          )
        )
      )
      // given a follower that has read the first commit and settled
      yield* open(1)
      assert.strictEqual(yield* Queue.take(received), 1)
      yield* settle
      reads.counting = true
      // when three more commits come, each received before the next
      for (let i = 2; i <= 4; i++) {
        yield* open(i)
        assert.strictEqual(yield* Queue.take(received), i)
      }
      yield* Fiber.join(follower)
      // then it read once per commit's hint: a page of one row left nothing to read until the next
      // commit (reading again at once after each page would make five)
      assert.strictEqual(reads.count, 3)
    }).pipe(Effect.provide(engineLayer()))
  )

  it.effect("a follower that starts after N continues from N+1, and can filter by aggregate", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      for (let i = 0; i < 3; i++) {
        yield* engine.dispatchWithReceipt({
          commandId: `open-${i}`,
          type: "account.open",
          accountId: `acc-${i}`,
          owner: "o"
        })
      }
      const tail = yield* Effect.fork(engine.followEvents({ after: 2 }).pipe(Stream.take(2), Stream.runCollect))
      const onlyAcc1 = yield* Effect.fork(
        engine.followEvents({ aggregateId: "acc-1" }).pipe(Stream.take(2), Stream.runCollect)
      )
      yield* engine.dispatchWithReceipt({ commandId: "dep-1", type: "account.deposit", accountId: "acc-1", amount: 3 })
      assert.deepStrictEqual(
        Chunk.toReadonlyArray(yield* Fiber.join(tail)).map((e) => e.sequence),
        [3, 4]
      )
      assert.deepStrictEqual(
        Chunk.toReadonlyArray(yield* Fiber.join(onlyAcc1)).map((e) => [e.sequence, e.type]),
        [
          [2, "account.opened"],
          [4, "account.deposited"]
        ]
      )
      const page = yield* engine.readEvents({ after: 1, limit: 2 })
      assert.deepStrictEqual(
        page.map((e) => e.sequence),
        [2, 3]
      )
      const decoded = yield* engine.decode(page[0]!)
      assert.deepStrictEqual(decoded, { type: "account.opened", owner: "o", at: 0 })
    }).pipe(Effect.provide(engineLayer()))
  )

  it.scoped("a commit hint rung after subscribing reaches the subscriber, however late its stream is run", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const commits = yield* engine.commits
      const outboxChanges = yield* engine.outboxChanges
      const answer = yield* engine.dispatchWithReceipt({
        commandId: "open-late",
        type: "account.open",
        accountId: "acc-late",
        owner: "o"
      })
      // Both streams are run only now, after the commit: the subscription, not the run, is what counts.
      const heads = yield* commits.pipe(Stream.take(1), Stream.runCollect)
      assert.deepStrictEqual(Chunk.toReadonlyArray(heads), [answer.sequence])
      const changes = yield* outboxChanges.pipe(Stream.take(1), Stream.runCollect)
      assert.strictEqual(Chunk.size(changes), 1)
    }).pipe(Effect.provide(engineLayer()))
  )
})
