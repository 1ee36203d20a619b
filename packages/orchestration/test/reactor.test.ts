import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, FiberRef, HashMap, Layer, Logger, TestClock } from "effect"
import { EffectFailure, EffectOutcomes, Engine, FreeSpace } from "../src/index.js"
import * as Outbox from "../src/Outbox.js"
import * as ReactorCursors from "../src/ReactorCursors.js"
import * as TestStore from "../src/testing/TestStore.js"
import { dyingSqlLayer } from "./fixtures/dyingSql.js"
import { jobsEngine, jobStatus, submit } from "./fixtures/Jobs.js"
import { tempDbFile } from "./fixtures/harness.js"
import {
  eventually,
  gated,
  refuseWrites,
  scriptedHandler,
  settle,
  stack,
  stackOverStore,
  testReactor
} from "./fixtures/reactors.js"

describe("reactors: wake-up", () => {
  it.effect("the doorbell wakes the reactor at once: performed and settled without the clock moving", () => {
    const handler = scriptedHandler()
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
      yield* eventually(
        Effect.sync(() => handler.performed.length === 1),
        "performed"
      )
      yield* eventually(
        Effect.map(Outbox.find("job:j1"), (row) => row?.status === "succeeded"),
        "settled"
      )
      const row = yield* Outbox.find("job:j1")
      assert.deepStrictEqual(
        [row?.status, row?.attempts, row?.response, row?.leaseOwner],
        ["succeeded", 1, { done: "job:j1" }, null]
      )
      assert.deepStrictEqual(yield* jobStatus("job:j1"), {
        status: "succeeded",
        detail: JSON.stringify({ done: "job:j1" })
      })
      assert.deepStrictEqual(handler.performed, ["job:j1#1"])
    }).pipe(Effect.provide(stack([testReactor(handler.handle)])))
  })
})

describe("reactors: timing under TestClock", () => {
  it.effect("the liveness poll finds a row whose ring was lost", () => {
    const handler = scriptedHandler()
    return Effect.gen(function* () {
      // First let the reactor go idle (it has run a job and is waiting for its next poll).
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("warm-up", "work.safe"))
      yield* eventually(
        Effect.map(Outbox.find("job:warm-up"), (row) => row?.status === "succeeded"),
        "warm-up settled"
      )
      yield* settle
      // A row committed without a ring (as another process would write it).
      yield* Outbox.insert([
        {
          effectId: "silent-1",
          commandId: "external",
          aggregateType: "job",
          aggregateId: "silent",
          kind: "work.safe",
          payloadJson: "{}",
          lane: "job:silent",
          availableAt: 0,
          now: 0
        }
      ])
      yield* settle
      assert.deepStrictEqual(handler.performed, ["job:warm-up#1"])
      yield* TestClock.adjust("999 millis")
      yield* settle
      assert.deepStrictEqual(handler.performed, ["job:warm-up#1"])
      yield* TestClock.adjust("1 millis")
      yield* eventually(
        Effect.sync(() => handler.performed.length === 2),
        "performed after the poll"
      )
      assert.deepStrictEqual(handler.performed, ["job:warm-up#1", "silent-1#1"])
    }).pipe(Effect.provide(stack([testReactor(handler.handle)])))
  })

  it.effect("a retry wakes the reactor at its due time, long before the next poll", () => {
    const handler = scriptedHandler()
    handler.behaviors.set("job:j1", (row) =>
      row.attempts < 2
        ? Effect.fail(new EffectFailure({ message: `flaky ${row.attempts}`, retryable: true }))
        : Effect.succeed("ok")
    )
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
      yield* eventually(
        Effect.map(Outbox.find("job:j1"), (row) => row?.status === "pending" && row.attempts === 1),
        "first failure settled"
      )
      assert.strictEqual((yield* Outbox.find("job:j1"))!.availableAt, 1_000)
      yield* TestClock.adjust("999 millis")
      yield* settle
      assert.deepStrictEqual(handler.performed, ["job:j1#1"])
      // the poll is a minute away: only the step's due time can wake it now
      yield* TestClock.adjust("1 millis")
      yield* eventually(
        Effect.map(Outbox.find("job:j1"), (r) => r?.status === "succeeded"),
        "second attempt at 1 s"
      )
      assert.deepStrictEqual(handler.performed, ["job:j1#1", "job:j1#2"])
    }).pipe(Effect.provide(stack([testReactor(handler.handle, { pollInterval: "1 minute" })])))
  })

  it.effect(
    "backoff is honoured exactly: a retryable failure runs again at attempt 2 after 1 s, attempt 3 after 2 s more",
    () => {
      const handler = scriptedHandler()
      handler.behaviors.set("job:j1", (row) =>
        row.attempts < 3
          ? Effect.fail(new EffectFailure({ message: `flaky ${row.attempts}`, retryable: true }))
          : Effect.succeed("ok")
      )
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
        yield* eventually(
          Effect.map(Outbox.find("job:j1"), (row) => row?.status === "pending" && row.attempts === 1),
          "first failure settled"
        )
        const row = yield* Outbox.find("job:j1")
        assert.strictEqual(row!.availableAt, 1_000)
        assert.deepStrictEqual(row!.error, { message: "flaky 1", reason: "handler" })
        yield* TestClock.adjust("999 millis")
        yield* settle
        assert.deepStrictEqual(handler.performed, ["job:j1#1"])
        yield* TestClock.adjust("1 millis")
        yield* eventually(
          Effect.sync(() => handler.performed.length === 2),
          "second attempt at 1 s"
        )
        yield* eventually(
          Effect.map(Outbox.find("job:j1"), (r) => r?.attempts === 2 && r.status === "pending"),
          "second failure settled"
        )
        assert.strictEqual((yield* Outbox.find("job:j1"))!.availableAt, 3_000)
        yield* TestClock.adjust("1999 millis")
        yield* settle
        assert.strictEqual(handler.performed.length, 2)
        yield* TestClock.adjust("1 millis")
        yield* eventually(
          Effect.map(Outbox.find("job:j1"), (r) => r?.status === "succeeded"),
          "third attempt succeeds"
        )
        assert.deepStrictEqual(handler.performed, ["job:j1#1", "job:j1#2", "job:j1#3"])
        const sql = yield* SqlClient
        const outcomes = yield* sql<{
          payload: string
        }>`SELECT payload FROM events WHERE type = 'job.outcome' ORDER BY sequence`
        assert.deepStrictEqual(
          outcomes.map((o) => JSON.parse(o.payload).status),
          ["retrying", "retrying", "succeeded"]
        )
      }).pipe(Effect.provide(stack([testReactor(handler.handle)])))
    }
  )

  it.effect("the wait for a due row ends when it is due, however long the step that computed it took", () => {
    const handler = scriptedHandler()
    handler.behaviors.set("job:j1", (row) =>
      row.attempts < 2 ? Effect.fail(new EffectFailure({ message: "flaky", retryable: true })) : Effect.succeed("ok")
    )
    // A step that is slow between reading the clock and going to sleep (as a PostgreSQL round trip is):
    // the storage guard's probe, which every step consults, stops once when armed. Only the reactor's
    // step (its fibers carry the `reactor` log annotation): the engine consults the probe too, before a
    // batch that may claim for the reactor at commit.
    const slow = { armed: false }
    const entered = Effect.runSync(Deferred.make<void>())
    const resume = Effect.runSync(Deferred.make<void>())
    const probe = Layer.succeed(FreeSpace.FreeSpace, {
      check: Effect.flatMap(FiberRef.get(FiberRef.currentLogAnnotations), (annotations) => {
        if (!slow.armed || !HashMap.has(annotations, "reactor")) return Effect.void
        slow.armed = false
        return Deferred.succeed(entered, undefined).pipe(Effect.zipRight(Deferred.await(resume)))
      }).pipe(Effect.as({ freeBytes: 1, floorBytes: 0, belowFloor: false }))
    })
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
      yield* eventually(
        Effect.map(Outbox.find("job:j1"), (row) => row?.status === "pending" && row.attempts === 1),
        "first failure settled"
      )
      assert.strictEqual((yield* Outbox.find("job:j1"))!.availableAt, 1_000)
      yield* settle
      // A ring (a row of a kind this reactor does not handle) starts a step at 0 ms; it reads the clock,
      // then stops in the probe while 500 ms pass.
      slow.armed = true
      yield* engine.dispatchWithReceipt(submit("other", "work.elsewhere"), { origin: "internal" })
      yield* Deferred.await(entered)
      yield* TestClock.adjust("500 millis")
      yield* Deferred.succeed(resume, undefined)
      yield* settle
      assert.deepStrictEqual(handler.performed, ["job:j1#1"])
      // The row is due at 1 s: the reactor wakes then, not 500 ms late.
      yield* TestClock.adjust("500 millis")
      yield* eventually(
        Effect.sync(() => handler.performed.length === 2),
        "second attempt when due at 1 s"
      )
      yield* eventually(
        Effect.map(Outbox.find("job:j1"), (r) => r?.status === "succeeded"),
        "second attempt settled"
      )
    }).pipe(Effect.provide(stack([testReactor(handler.handle)]).pipe(Layer.provide(probe))))
  })

  it.effect("after max attempts the row is failed with its error and attempt count, and the aggregate knows", () => {
    const handler = scriptedHandler()
    handler.behaviors.set("job:j1", (row) =>
      Effect.fail(new EffectFailure({ message: `down ${row.attempts}`, retryable: true, code: "E_DOWN" }))
    )
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
      yield* eventually(
        Effect.sync(() => handler.performed.length === 1),
        "attempt 1"
      )
      yield* eventually(
        Effect.map(Outbox.find("job:j1"), (r) => r?.status === "pending"),
        "attempt 1 settled"
      )
      yield* TestClock.adjust("1 second")
      yield* eventually(
        Effect.map(Outbox.find("job:j1"), (r) => r?.attempts === 2 && r.status === "pending"),
        "attempt 2 settled"
      )
      yield* TestClock.adjust("2 seconds")
      yield* eventually(
        Effect.map(Outbox.find("job:j1"), (r) => r?.status === "failed"),
        "dead letter"
      )
      const row = (yield* Outbox.find("job:j1"))!
      assert.strictEqual(row.attempts, 3)
      assert.deepStrictEqual(row.error, {
        message: "down 3 (gave up after 3 attempts)",
        code: "E_DOWN",
        reason: "handler"
      })
      assert.deepStrictEqual(yield* jobStatus("job:j1"), {
        status: "failed",
        detail: "down 3 (gave up after 3 attempts)"
      })
      yield* TestClock.adjust("1 minute")
      yield* settle
      assert.strictEqual(handler.performed.length, 3)
    }).pipe(Effect.provide(stack([testReactor(handler.handle)])))
  })

  it.effect("a failing store gives a cool-off, not a hot loop, and work resumes when it heals", () => {
    const handler = scriptedHandler()
    const failures: Array<string> = []
    const logger = Logger.make(({ message }) => {
      const text = Array.isArray(message) ? String(message[0]) : String(message)
      if (text.includes("cooling off")) failures.push(text)
    })
    // Work to claim while the store fails: a first attempt that fails, so the row waits, pending, for
    // its retry at 1 s. A reactor with nothing to claim writes nothing (on SQLite a claim that finds no
    // row runs no UPDATE), so only a claim of a due row meets the refusal.
    handler.behaviors.set("job:j0", (row) =>
      row.attempts === 1
        ? Effect.fail(new EffectFailure({ message: "down once", retryable: true, code: "E_DOWN" }))
        : Effect.succeed({ done: row.effectId })
    )
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("j0", "work.safe"))
      yield* eventually(
        Effect.map(Outbox.find("job:j0"), (r) => r?.attempts === 1 && r.status === "pending"),
        "j0 waits for its retry"
      )
      // Every write is refused (SQLITE_READONLY, or PostgreSQL's read-only error), as from a failing device.
      yield* refuseWrites(true)
      // 2 s in 100 ms steps: each retry's next sleep is registered before the clock moves past it.
      for (let step = 0; step < 20; step++) {
        yield* TestClock.adjust("100 millis")
        yield* settle
      }
      // From j0's due time on, 100 ms, 200 ms, 400 ms ... : a handful of tries, not thousands. That the
      // loop outlives them is shown by the heal below.
      assert.isAtLeast(failures.length, 1)
      assert.isAtMost(failures.length, 6)
      yield* refuseWrites(false)
      yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
      yield* TestClock.adjust("2 seconds")
      yield* eventually(
        Effect.map(Outbox.find("job:j1"), (r) => r?.status === "succeeded"),
        "healed"
      )
      yield* eventually(
        Effect.map(Outbox.find("job:j0"), (r) => r?.status === "succeeded"),
        "j0 retried after the heal"
      )
    }).pipe(
      Effect.provide(
        stack([testReactor(handler.handle)]).pipe(Layer.provide(Logger.replace(Logger.defaultLogger, logger)))
      )
    )
  })
})

describe("reactors: lanes", () => {
  it.effect("one lane runs strictly in sequence order", () => {
    const handler = scriptedHandler()
    const gates = [0, 1, 2].map(() => gated())
    gates.forEach((g, i) => handler.behaviors.set(`job:j1:${i}`, g.behavior))
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("j1", "work.safe", { count: 3 }))
      yield* eventually(
        Effect.sync(() => handler.performed.length === 1),
        "first of the lane"
      )
      yield* settle
      assert.deepStrictEqual(handler.performed, ["job:j1:0#1"])
      for (const [i, g] of gates.entries()) {
        yield* g.open
        if (i < 2)
          yield* eventually(
            Effect.sync(() => handler.performed.length === i + 2),
            `lane item ${i + 1}`
          )
      }
      yield* eventually(
        Effect.map(Outbox.list({ status: "succeeded" }), (rows) => rows.length === 3),
        "lane done"
      )
      assert.deepStrictEqual(handler.performed, ["job:j1:0#1", "job:j1:1#1", "job:j1:2#1"])
      assert.strictEqual(handler.maxRunning(), 1)
    }).pipe(Effect.provide(stack([testReactor(handler.handle)])))
  })

  it.effect("several lanes run in parallel up to the reactor's concurrency", () => {
    const handler = scriptedHandler()
    const gates = [0, 1, 2].map(() => gated())
    gates.forEach((g, i) => handler.behaviors.set(`job:j${i}`, g.behavior))
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      for (const i of [0, 1, 2]) yield* engine.dispatchWithReceipt(submit(`j${i}`, "work.safe"))
      yield* eventually(
        Effect.sync(() => handler.performed.length === 2),
        "two lanes at once"
      )
      yield* settle
      assert.strictEqual(handler.running(), 2)
      yield* gates[0]!.open
      yield* eventually(
        Effect.sync(() => handler.performed.length === 3),
        "third lane gets the freed slot"
      )
      yield* gates[1]!.open
      yield* gates[2]!.open
      yield* eventually(
        Effect.map(Outbox.list({ status: "succeeded" }), (rows) => rows.length === 3),
        "all done"
      )
      assert.strictEqual(handler.maxRunning(), 2)
    }).pipe(Effect.provide(stack([testReactor(handler.handle, { concurrency: 2 })])))
  })
})

describe("reactors: cursors", () => {
  it.effect("an operator retry of a row below the reactor's cursor is performed again (the cursor moves back)", () => {
    const handler = scriptedHandler()
    handler.behaviors.set("job:j1", (row) =>
      row.attempts === 1 ? Effect.fail(new EffectFailure({ message: "no", retryable: false })) : Effect.succeed("yes")
    )
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
      yield* eventually(
        Effect.map(Outbox.find("job:j1"), (r) => r?.status === "failed"),
        "failed"
      )
      const failed = (yield* Outbox.find("job:j1"))!
      // The reactor has moved its cursor past the settled row: its claims no longer look at it.
      yield* eventually(
        Effect.map(ReactorCursors.cursor("test-reactor"), (position) => position >= failed.sequence),
        "cursor past the failed row"
      )
      yield* engine.dispatchWithReceipt(
        {
          type: "effect.retry",
          commandId: EffectOutcomes.operatorId("retry", "job:j1", 1, 0),
          effectId: "job:j1",
          attempt: 1,
          aggregateType: "job",
          aggregateId: "j1",
          by: "operator"
        },
        { origin: "internal" }
      )
      assert.isBelow(yield* ReactorCursors.cursor("test-reactor"), failed.sequence)
      yield* eventually(
        Effect.map(Outbox.find("job:j1"), (r) => r?.status === "succeeded"),
        "performed again"
      )
      assert.deepStrictEqual(handler.performed, ["job:j1#1", "job:j1#2"])
    }).pipe(Effect.provide(stack([testReactor(handler.handle)])))
  })
})

describe("reactors: a step that dies", () => {
  /**
   * The storage guard's probe, read by every step, dies while armed (once, or on every read): a bug in
   * a read. Only in the reactor's fibers (their `reactor` log annotation): a batch consults the probe
   * too. `errors` collects what each cool-off logged.
   */
  const dyingStep = () => {
    const errors: Array<string> = []
    const logger = Logger.make(({ message }) => {
      const parts = Array.isArray(message) ? message : [message]
      if (String(parts[0]).includes("cooling off")) errors.push(JSON.stringify(parts[1]))
    })
    const broken = { armed: false, once: true }
    const probe = Layer.succeed(FreeSpace.FreeSpace, {
      check: Effect.flatMap(FiberRef.get(FiberRef.currentLogAnnotations), (annotations) => {
        if (!broken.armed || !HashMap.has(annotations, "reactor")) return Effect.void
        if (broken.once) broken.armed = false
        return Effect.dieMessage("probe bug")
      }).pipe(Effect.as({ freeBytes: 1, floorBytes: 0, belowFloor: false }))
    })
    const handler = scriptedHandler()
    const provided = stack([testReactor(handler.handle)]).pipe(
      Layer.provide(probe),
      Layer.provide(Logger.replace(Logger.defaultLogger, logger))
    )
    return { errors, broken, handler, provided }
  }

  it.effect("a defect in a step is logged and cooled off like a failure; the loop goes on claiming", () => {
    const { errors, broken, handler, provided } = dyingStep()
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* settle
      // given a step that dies (a ring from a row of a kind this reactor does not handle starts it)
      broken.armed = true
      yield* engine.dispatchWithReceipt(submit("other", "work.elsewhere"), { origin: "internal" })
      yield* eventually(
        Effect.sync(() => !broken.armed && errors.length === 1),
        "the step died and was logged"
      )
      assert.include(errors[0], "probe bug")
      // when a row the loop alone claims (process-bound: never claimed at commit) comes after the cool-off
      yield* TestClock.adjust("100 millis")
      yield* engine.dispatchWithReceipt(submit("j1", "work.bound"))
      // then it is performed: the loop lives
      yield* eventually(
        Effect.map(Outbox.find("job:j1"), (row) => row?.status === "succeeded"),
        "performed after the defect"
      )
      assert.deepStrictEqual(handler.performed, ["job:j1#1"])
    }).pipe(Effect.provide(provided))
  })

  it.effect("commits during a cool-off do not cut it short: a step that dies every time runs once per cool-off", () => {
    const { errors, broken, handler, provided } = dyingStep()
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* settle
      // given a step that dies on every try
      broken.once = false
      broken.armed = true
      yield* engine.dispatchWithReceipt(submit("other-0", "work.elsewhere"), { origin: "internal" })
      yield* eventually(
        Effect.sync(() => errors.length === 1),
        "the step died and was logged"
      )
      // when commits ring the reactor while the clock stays inside its first cool-off (100 ms)
      for (let n = 1; n <= 5; n++) {
        yield* engine.dispatchWithReceipt(submit(`other-${n}`, "work.elsewhere"), { origin: "internal" })
        yield* settle
      }
      // then no step ran before the cool-off ended: one failure logged, not one a commit
      assert.strictEqual(errors.length, 1)
      // and once it ends (and the bug is gone), the loop looks again and claims
      broken.armed = false
      yield* engine.dispatchWithReceipt(submit("j1", "work.bound"))
      yield* TestClock.adjust("100 millis")
      yield* eventually(
        Effect.map(Outbox.find("job:j1"), (row) => row?.status === "succeeded"),
        "performed after the cool-off"
      )
      assert.deepStrictEqual(handler.performed, ["job:j1#1"])
    }).pipe(Effect.provide(provided))
  })
})

describe("reactors: start-up", () => {
  it.effect("a first read of the cursor that fails does not end the loop: it cools off and claims", () => {
    const handler = scriptedHandler()
    // given a store that refuses the reactor's first read of its cursor (busy, or a connection blip)
    const broken = { armed: true, once: true, refuse: true }
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* settle
      // Only where the store counts its changes (the better-sqlite3 store) does a step read its cursor; on
      // PostgreSQL and node:sqlite it claims from 0 and reads none (the loop read one before it began).
      if (TestStore.testStoreKind() === "sqlite") assert.isFalse(broken.armed, "the cursor's read was refused")
      // when a row only the loop claims (process-bound: never claimed at commit) comes after the cool-off
      yield* engine.dispatchWithReceipt(submit("j1", "work.bound"))
      yield* TestClock.adjust("100 millis")
      // then it is performed: the loop lives
      yield* eventually(
        Effect.map(Outbox.find("job:j1"), (row) => row?.status === "succeeded"),
        "performed after the refused read"
      )
      assert.deepStrictEqual(handler.performed, ["job:j1#1"])
    }).pipe(
      Effect.provide(
        stackOverStore([testReactor(handler.handle)]).pipe(
          Layer.provideMerge(dyingSqlLayer("SELECT position FROM reactor_cursors", broken)),
          Layer.provideMerge(TestStore.layer({ filename: ":memory:" }))
        )
      )
    )
  })
})

describe("reactors: a row that cannot be decoded", () => {
  it.effect(
    "a claimed row whose payload is not JSON fails with a stored reason, unperformed; the rows beside it and later work run",
    () => {
      const handler = scriptedHandler()
      const outboxRow = (effectId: string) =>
        Effect.flatMap(SqlClient, (sql) =>
          Effect.map(
            sql<{
              status: string
              error: string | null
            }>`SELECT status, error FROM outbox WHERE effect_id = ${effectId}`,
            (rows) => rows[0]
          )
        )
      const file = tempDbFile()
      // given two due rows of two lanes, left by an earlier process, one whose stored payload was cut off
      // (a bad migration, a hand edit)
      const earlier = Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.activate
        yield* engine.dispatchWithReceipt(submit("bad", "work.safe"))
        yield* engine.dispatchWithReceipt(submit("good", "work.safe"))
        yield* Effect.flatMap(
          SqlClient,
          (sql) => sql`UPDATE outbox SET payload = ${'{"input": "cut of'} WHERE effect_id = 'job:bad'`
        )
      }).pipe(Effect.provide(jobsEngine(file)))
      // when a node boots and its reactor claims both in one statement
      const next = Effect.gen(function* () {
        const engine = yield* Engine.Engine
        // then the good row is performed and settled
        yield* eventually(
          Effect.map(outboxRow("job:good"), (row) => row?.status === "succeeded"),
          "the row beside it settled"
        )
        // and the undecodable one failed for good with a stored reason, its handler never called, its aggregate told
        yield* eventually(
          Effect.map(outboxRow("job:bad"), (row) => row?.status === "failed"),
          "the undecodable row failed"
        )
        const error = JSON.parse((yield* outboxRow("job:bad"))!.error!)
        assert.strictEqual(error.code, "payload-undecodable")
        assert.include(error.message, "payload")
        assert.notInclude(handler.performed.join(" "), "job:bad")
        assert.strictEqual((yield* jobStatus("job:bad"))?.status, "failed")
        // and an operator can still read the row
        const read = (yield* Outbox.find("job:bad"))!
        assert.deepStrictEqual([read.status, read.payload], ["failed", null])
        // and the reactor, and the commits that claim for it, keep serving new work
        yield* engine.dispatchWithReceipt(submit("later", "work.safe"))
        yield* eventually(
          Effect.map(outboxRow("job:later"), (row) => row?.status === "succeeded"),
          "later work performed"
        )
      }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: file })))
      return Effect.zipRight(earlier, next)
    }
  )
})
