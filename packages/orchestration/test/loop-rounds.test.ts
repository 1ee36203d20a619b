/**
 * Background loops outlive a round that dies (LoopRounds.survive). The worker's heartbeat is what
 * keeps peers from reclaiming this process's leases: a process whose heartbeat stopped while it runs
 * is a live owner whom peers would judge dead and take work from (a process-bound effect performed
 * twice). Retention's pruning keeps a year-old store serving like a new one.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Engine, FaultPoints, LoopRounds, Retention, Worker } from "../src/index.js"
import * as TestStore from "../src/testing/TestStore.js"
import { Effect, Exit, Fiber, Layer, Logger, Option, TestClock } from "effect"
import { dyingSqlLayer } from "./fixtures/dyingSql.js"
import { submit } from "./fixtures/Jobs.js"
import { eventually, settle, stack, stackOverStore } from "./fixtures/reactors.js"
import { logLevels } from "./fixtures/logLevels.js"

const heartbeatAt = Effect.flatMap(SqlClient, (sql) =>
  Effect.map(
    sql<{ heartbeat_at: number | string }>`SELECT heartbeat_at FROM owners WHERE owner_id = 'owner-A'`,
    (rows) => Number(rows[0]?.heartbeat_at)
  )
)

describe("the worker's heartbeat", () => {
  it.effect("a beat that dies is logged and the next one lands; until it does, the worker judges nobody dead", () => {
    const broken = { armed: false, once: false }
    const warnings: Array<string> = []
    const kept = Logger.add(
      Logger.make(({ message }) => {
        const parts = Array.isArray(message) ? message : [message]
        warnings.push(parts.map(String).join(" "))
      })
    )
    return Effect.gen(function* () {
      const worker = yield* Worker.Worker
      // given a worker that has beaten through a whole dead-after span (it may judge others)
      for (let s = 1; s <= 10; s++) {
        yield* TestClock.adjust("1 second")
        yield* settle
      }
      assert.strictEqual(yield* heartbeatAt, 10_000)
      assert.strictEqual(yield* worker.deadBefore(10_000), 0)
      // when a beat dies
      broken.armed = true
      yield* TestClock.adjust("1 second")
      yield* settle
      // then it may not judge anyone dead: its own beat did not land
      assert.strictEqual(yield* worker.deadBefore(11_000), undefined)
      assert.isTrue(
        warnings.some((w) => w.startsWith("heartbeat not recorded") && w.includes("driver bug")),
        "the dead beat was logged"
      )
      // and the beats go on once the bug is gone
      broken.armed = false
      yield* TestClock.adjust("1 second")
      yield* settle
      assert.strictEqual(yield* heartbeatAt, 12_000)
    }).pipe(
      Effect.provide(
        stackOverStore([], { worker: { heartbeatEvery: "1 second", deadAfter: "10 seconds" } }).pipe(
          Layer.provideMerge(dyingSqlLayer("INSERT INTO owners", broken)),
          Layer.provideMerge(kept),
          Layer.provideMerge(TestStore.layer({ filename: ":memory:" }))
        )
      )
    )
  })
})

describe("retention's rounds", () => {
  it.effect("a round that dies does not end the loop: the next round prunes", () => {
    const broken = { armed: true, once: true }
    const receipts = Effect.flatMap(SqlClient, (sql) =>
      Effect.map(sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM receipts`, (rows) => Number(rows[0]!.n))
    )
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      // given a receipt past its keeping period
      yield* engine.dispatchWithReceipt(submit("j1", "work.elsewhere"), { origin: "internal" })
      assert.strictEqual(yield* receipts, 1)
      // when the first round dies (its first statement) before it reaches the receipts
      yield* TestClock.adjust("1 minute")
      yield* settle
      assert.isFalse(broken.armed, "the round ran and died")
      assert.strictEqual(yield* receipts, 1)
      // then the next round prunes it: the loop lives
      yield* TestClock.adjust("1 minute")
      yield* settle
      assert.strictEqual(yield* receipts, 0)
    }).pipe(
      Effect.provide(
        Retention.layer({ every: "1 minute", receipts: "1 second" }).pipe(
          Layer.provideMerge(stackOverStore([])),
          Layer.provideMerge(dyingSqlLayer("DELETE FROM outbox", broken)),
          Layer.provideMerge(TestStore.layer({ filename: ":memory:" }))
        )
      )
    )
  })
})

describe("the engine's processor", () => {
  it.effect(
    "a batch that dies after its commit is answered with what it committed, and later commands are answered too",
    () => {
      // A defect at the instant after the commit (the point crash tests kill the process at): a bug in
      // the work that follows a commit (claims handed over, horizons moved, readers rung).
      const broken = { armed: true }
      const faults = Layer.succeed(FaultPoints.FaultPoints, {
        enabled: true,
        hit: (point) =>
          Effect.suspend(() => {
            if (point !== "dispatch.after-commit" || !broken.armed) return Effect.void
            broken.armed = false
            return Effect.dieMessage("bug after the commit")
          })
      })
      const answered = (fiber: Fiber.RuntimeFiber<unknown, unknown>) => Effect.map(fiber.poll, Option.isSome)
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        // given a batch whose work after its commit dies
        const first = yield* Effect.fork(
          engine.dispatchWithReceipt(submit("j1", "work.elsewhere"), { origin: "internal" })
        )
        // then its command is answered, with what it committed (its receipt says accepted too)
        yield* eventually(answered(first), "the command of the batch that died was answered")
        assert.isFalse(broken.armed)
        const exit = yield* Fiber.await(first)
        assert.isTrue(Exit.isSuccess(exit), "accepted: it committed")
        const again = yield* engine.dispatchWithReceipt(submit("j1", "work.elsewhere"), { origin: "internal" })
        assert.isTrue(again.duplicate)
        // and the processor goes on: a later command is answered
        const later = yield* Effect.fork(
          engine.dispatchWithReceipt(submit("j2", "work.elsewhere"), { origin: "internal" })
        )
        yield* eventually(answered(later), "a later command was answered")
      }).pipe(Effect.provide(stack([]).pipe(Layer.provide(faults))))
    }
  )
})

describe("LoopRounds.survive", () => {
  it.effect(
    "failures and defects are logged and the loop goes on; a child's interruption is a failed round; interrupting the loop ends it",
    () => {
      const { logged, layer: kept } = logLevels()
      return Effect.gen(function* () {
        let round = 0
        const rounds = [
          Effect.fail("refused"),
          Effect.dieMessage("bug"),
          // A child fiber that was interrupted, joined: its cause is interrupt-only, from inside the round.
          Effect.flatMap(Effect.fork(Effect.never), (child) =>
            Effect.zipRight(Fiber.interrupt(child), Fiber.join(child))
          ),
          Effect.void
        ]
        const loop = yield* Effect.fork(
          Effect.forever(
            Effect.suspend(() => rounds[round++ % rounds.length]!).pipe(
              LoopRounds.survive("round failed"),
              Effect.zipRight(Effect.sleep("1 second"))
            )
          )
        )
        for (let s = 0; s < 8; s++) yield* TestClock.adjust("1 second")
        assert.isAtLeast(round, 8, "every kind of failed round was followed by another")
        assert.deepStrictEqual(logged.slice(0, 3), ["WARN", "ERROR", "ERROR"])
        // Interrupting the loop's own fiber ends it.
        yield* Fiber.interrupt(loop)
        const at = round
        yield* TestClock.adjust("5 seconds")
        assert.strictEqual(round, at)
        assert.isTrue(Exit.isInterrupted(yield* Fiber.await(loop)))
      }).pipe(Effect.provide(kept))
    }
  )
})
