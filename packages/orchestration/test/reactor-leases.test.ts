import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Layer, Scope, TestClock } from "effect"
import { CommandRejected, EffectOutcomes, Engine, EngineUnavailable, FaultPoints, FreeSpace } from "../src/index.js"
import * as TestStore from "../src/testing/TestStore.js"
import * as Outbox from "../src/Outbox.js"
import * as Owners from "../src/Owners.js"
import type { ReactorDefinition } from "../src/Reactor.js"
import { jobStatus, submit } from "./fixtures/Jobs.js"
import { eventually, gated, scriptedHandler, settle, stack, stackOverStore, testReactor } from "./fixtures/reactors.js"

const rowIs = (effectId: string, predicate: (row: Outbox.OutboxRow) => boolean) =>
  Effect.map(Outbox.find(effectId), (row) => row !== undefined && predicate(row))

describe("outcomes through the front door", () => {
  it.effect(
    "the same outcome twice is answered from its receipt; an outcome for an old attempt is rejected and changes nothing",
    () => {
      const handler = scriptedHandler()
      const slow = gated()
      handler.behaviors.set("job:j1", slow.behavior)
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
        yield* eventually(
          rowIs("job:j1", (r) => r.status === "running"),
          "claimed"
        )
        // Settle attempt 1 by hand, as the reactor would, then once more with the same id.
        const outcome = {
          type: "effect.succeed",
          commandId: EffectOutcomes.outcomeId("job:j1", 1),
          effectId: "job:j1",
          attempt: 1,
          aggregateType: "job",
          aggregateId: "j1",
          by: "reactor",
          response: { by: "hand" }
        }
        const first = yield* engine.dispatchWithReceipt(outcome, { origin: "internal" })
        const again = yield* engine.dispatchWithReceipt(outcome, { origin: "internal" })
        assert.strictEqual(first.duplicate, false)
        assert.deepStrictEqual(again, { ...first, duplicate: true })
        const sql = yield* SqlClient
        const before = yield* sql`SELECT * FROM outbox`
        // An outcome for another attempt of the now-settled row: a stored StaleOutcome rejection.
        const stale = yield* Effect.flip(
          engine.dispatchWithReceipt(
            { ...outcome, commandId: EffectOutcomes.outcomeId("job:j1", 2), attempt: 2, response: "late" },
            { origin: "internal" }
          )
        )
        assert.instanceOf(stale, CommandRejected)
        assert.strictEqual((stale as CommandRejected).reason, "stale-outcome")
        assert.deepStrictEqual(yield* sql`SELECT * FROM outbox`, before)
        assert.deepStrictEqual(yield* jobStatus("job:j1"), {
          status: "succeeded",
          detail: JSON.stringify({ by: "hand" })
        })
        // The reactor's own settle, arriving after, finds the row settled: stale, nothing changes.
        yield* slow.open
        yield* eventually(
          Effect.map(engine.receipt("outcome:job:j1#1"), (r) => r._tag === "Some"),
          "receipt"
        )
        yield* settle
        assert.deepStrictEqual((yield* Outbox.find("job:j1"))!.response, { by: "hand" })
      }).pipe(Effect.provide(stack([testReactor(handler.handle)])))
    }
  )

  it.effect("an outcome for an earlier attempt of a row claimed again is stale and changes nothing", () => {
    const handler = scriptedHandler()
    const slow = gated()
    handler.behaviors.set("job:j1", slow.behavior)
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const sql = yield* SqlClient
      yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
      yield* eventually(
        rowIs("job:j1", (r) => r.status === "running"),
        "claimed"
      )
      // A peer reclaimed the row and claimed it again: running, at attempt 2, under its lease.
      yield* sql`UPDATE outbox SET lease_owner = 'peer', attempts = 2 WHERE effect_id = 'job:j1'`
      const before = yield* sql`SELECT * FROM outbox`
      const stale = yield* Effect.flip(
        engine.dispatchWithReceipt(
          {
            type: "effect.succeed",
            commandId: EffectOutcomes.outcomeId("job:j1", 1),
            effectId: "job:j1",
            attempt: 1,
            aggregateType: "job",
            aggregateId: "j1",
            by: "reactor",
            response: "from attempt 1"
          },
          { origin: "internal" }
        )
      )
      assert.instanceOf(stale, CommandRejected)
      assert.strictEqual((stale as CommandRejected).reason, "stale-outcome")
      assert.deepStrictEqual(yield* sql`SELECT * FROM outbox`, before)
      assert.deepStrictEqual(yield* jobStatus("job:j1"), { status: "submitted", detail: null })
      // The first owner's own settle of attempt 1 changes nothing either.
      yield* slow.open
      yield* eventually(
        Effect.sync(() => handler.running() === 0),
        "first owner's handler finished"
      )
      yield* settle
      assert.deepStrictEqual(yield* sql`SELECT * FROM outbox`, before)
      // On a failed assertion too, the handler finishes, so the reactor's shutdown has nothing to wait for.
    }).pipe(Effect.ensuring(slow.open), Effect.provide(stack([testReactor(handler.handle)])))
  })

  it.effect("clients cannot send outcome commands or outcome ids", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const forged = yield* Effect.flip(
        engine.dispatchWithReceipt({
          type: "effect.succeed",
          commandId: "x",
          effectId: "job:j1",
          attempt: 1,
          aggregateType: "job",
          aggregateId: "j1",
          by: "reactor",
          response: 1
        })
      )
      assert.strictEqual(forged._tag, "InvalidCommand")
      const forgedId = yield* Effect.flip(
        engine.dispatchWithReceipt({ ...submit("j1", "work.safe"), commandId: "outcome:job:j1#1" })
      )
      assert.strictEqual(forgedId._tag, "InvalidCommand")
    }).pipe(Effect.provide(stack([testReactor(scriptedHandler().handle)])))
  )
})

describe("leases", () => {
  it.effect("renewal keeps a long effect owned past its original lease", () => {
    const handler = scriptedHandler()
    const long = gated({ long: true })
    handler.behaviors.set("job:j1", long.behavior)
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
      yield* eventually(
        rowIs("job:j1", (r) => r.status === "running"),
        "claimed"
      )
      assert.strictEqual((yield* Outbox.find("job:j1"))!.leaseExpiresAt, 3_000)
      for (let i = 0; i < 10; i++) {
        yield* TestClock.adjust("1 second")
        yield* settle
      }
      const row = (yield* Outbox.find("job:j1"))!
      assert.deepStrictEqual([row.status, row.leaseOwner, row.attempts], ["running", "owner-A", 1])
      assert.isAbove(row.leaseExpiresAt!, 10_000)
      yield* long.open
      yield* eventually(
        rowIs("job:j1", (r) => r.status === "succeeded"),
        "settled"
      )
      assert.deepStrictEqual(handler.performed, ["job:j1#1"])
    }).pipe(Effect.provide(stack([testReactor(handler.handle, { lease: "3 seconds" })])))
  })

  /**
   * A handler that never ends runs job j1 under a 3 s lease (renewed every second); another owner then
   * takes the row over with a raw UPDATE (as a reclaim on another process would: nothing rings here).
   * `noticed` runs after the takeover and must see the handler interrupted; then the row stays the
   * thief's and no outcome of attempt 1 was recorded.
   */
  const stolenLease = (
    reactor: Partial<ReactorDefinition>,
    noticed: (interrupted: Deferred.Deferred<void>) => Effect.Effect<void>
  ) => {
    const handler = scriptedHandler()
    const interrupted = Effect.runSync(Deferred.make<void>())
    handler.behaviors.set("job:j1", () =>
      Effect.never.pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined)))
    )
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
      yield* eventually(
        rowIs("job:j1", (r) => r.status === "running"),
        "claimed"
      )
      const sql = yield* SqlClient
      yield* sql`UPDATE outbox SET lease_owner = 'thief', attempts = 2 WHERE effect_id = 'job:j1'`
      yield* noticed(interrupted)
      const row = (yield* Outbox.find("job:j1"))!
      assert.deepStrictEqual([row.status, row.leaseOwner, row.attempts], ["running", "thief", 2])
      assert.isTrue((yield* engine.receipt("outcome:job:j1#1"))._tag === "None")
    }).pipe(Effect.provide(stack([testReactor(handler.handle, { lease: "3 seconds", ...reactor })])))
  }

  it.effect("a worker that lost its lease is interrupted and cannot settle", () =>
    stolenLease({}, (interrupted) =>
      Effect.gen(function* () {
        yield* TestClock.adjust("1 second")
        yield* Deferred.await(interrupted)
        yield* settle
      })
    )
  )

  it.effect("a renewal refused stops the handler by itself, with the cancel watch's poll out of reach", () =>
    // The test above may be won by the cancel watch's poll (500 ms) before the renewal (1 s) runs.
    // Here the watch polls once an hour and nothing rings it, so only the renewal's `false` can stop
    // the handler. (No shutdown grace: a handler left running when this fails is interrupted at
    // once, so the failure is an assertion, not a hang on the TestClock.)
    stolenLease({ cancelPollInterval: "1 hour", shutdownGrace: "0 millis" }, (interrupted) =>
      Effect.gen(function* () {
        // Before the first renewal is due, nothing has noticed.
        yield* TestClock.adjust("900 millis")
        yield* settle
        assert.isFalse(yield* Deferred.isDone(interrupted))
        yield* TestClock.adjust("100 millis")
        yield* settle
        assert.isTrue(yield* Deferred.isDone(interrupted), "the refused renewal stopped the handler")
      })
    )
  )

  it.effect(
    "two owners on one store: a dead owner's rows are taken over by policy, a slow live owner's are not",
    () => {
      const handler = scriptedHandler()
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        // Three rows claimed by other owners before this one starts claiming.
        for (const [job, kind] of [
          ["dead-safe", "work.safe"],
          ["dead-bound", "work.bound"],
          ["slow", "work.bound"]
        ] as const) {
          yield* engine.dispatchDuringBoot(submit(job, kind))
        }
        yield* Owners.heartbeat("owner-dead", "node-B", 0)
        yield* Owners.heartbeat("owner-slow", "node-C", 0)
        const claim = (owner: string, kinds: ReadonlyArray<string>) =>
          Outbox.claim({ kinds, owner, now: 0, leaseMs: 30_000, limit: 10, after: 0 })
        const sql = yield* SqlClient
        yield* claim("owner-dead", ["work.safe", "work.bound"])
        yield* sql`UPDATE outbox SET lease_owner = 'owner-slow' WHERE effect_id = 'job:slow'`
        yield* engine.activate
        // 40 s later: every lease expired; owner-dead stopped beating, owner-slow kept beating.
        for (let second = 1; second <= 40; second++) {
          yield* Owners.heartbeat("owner-slow", "node-C", second * 1_000)
          yield* TestClock.adjust("1 second")
          yield* settle
        }
        yield* eventually(
          rowIs("job:dead-safe", (r) => r.status === "succeeded"),
          "dead replay-safe row redone"
        )
        const deadBound = (yield* Outbox.find("job:dead-bound"))!
        assert.strictEqual(deadBound.status, "failed")
        assert.deepStrictEqual(deadBound.error, {
          message: "owner stopped before the effect completed",
          code: "owner-lost",
          reason: "process-lost"
        })
        assert.deepStrictEqual(yield* jobStatus("job:dead-bound"), {
          status: "failed",
          detail: "owner stopped before the effect completed"
        })
        const slow = (yield* Outbox.find("job:slow"))!
        assert.deepStrictEqual([slow.status, slow.leaseOwner], ["running", "owner-slow"])
        // The replay-safe row ran here once (attempt 2); the process-bound ones never ran here.
        assert.deepStrictEqual(handler.performed, ["job:dead-safe#2"])
        const sqlEvents = yield* sql<{
          payload: string
        }>`SELECT payload FROM events WHERE type = 'job.outcome' AND aggregate_id = 'dead-safe' ORDER BY sequence`
        assert.deepStrictEqual(
          sqlEvents.map((e) => [JSON.parse(e.payload).status, JSON.parse(e.payload).by]),
          [
            ["requeued", "reclaim"],
            ["succeeded", "reactor"]
          ]
        )
      }).pipe(Effect.provide(stack([testReactor(handler.handle)], { activation: "manual" })))
    }
  )

  it.effect(
    "a handler past its timeout is settled by policy: replay-safe retried, process-bound failed as uncertain",
    () => {
      const handler = scriptedHandler()
      handler.behaviors.set("job:safe", (row) => (row.attempts === 1 ? Effect.never : Effect.succeed("second time")))
      handler.behaviors.set("job:bound", () => Effect.never)
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(submit("safe", "work.safe"))
        yield* engine.dispatchWithReceipt(submit("bound", "work.bound"))
        yield* eventually(
          Effect.sync(() => handler.performed.length === 2),
          "both started"
        )
        yield* TestClock.adjust("5 seconds")
        yield* eventually(
          rowIs("job:bound", (r) => r.status === "failed"),
          "bound timed out"
        )
        assert.deepStrictEqual((yield* Outbox.find("job:bound"))!.error, {
          message: "timed out after 5s; may or may not have taken effect",
          code: "timeout",
          reason: "timeout"
        })
        yield* eventually(
          rowIs("job:safe", (r) => r.status === "pending"),
          "safe back to pending"
        )
        yield* TestClock.adjust("1 second")
        yield* eventually(
          rowIs("job:safe", (r) => r.status === "succeeded"),
          "safe retried"
        )
        assert.strictEqual((yield* Outbox.find("job:safe"))!.response, "second time")
      }).pipe(
        Effect.provide(
          stack([
            testReactor(handler.handle, {
              kinds: {
                "work.safe": { onProcessLoss: "replay-safe", timeout: "5 seconds" },
                "work.bound": { onProcessLoss: "process-bound", timeout: "5 seconds" }
              }
            })
          ])
        )
      )
    }
  )
})

describe("the storage guard", () => {
  it.effect(
    "below the floor no new row is claimed while a running effect's settle still lands; above it, work resumes",
    () => {
      const handler = scriptedHandler()
      const running = gated("finished")
      handler.behaviors.set("job:first", running.behavior)
      const probe = FreeSpace.controllable(1_000, 10_000)
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(submit("first", "work.safe"))
        yield* eventually(
          rowIs("job:first", (r) => r.status === "running"),
          "first claimed"
        )
        probe.state.free = 10
        // New client work is refused at the door; work that entered through the engine (a delegate) parks.
        const refused = yield* Effect.flip(engine.dispatchWithReceipt(submit("second", "work.safe")))
        assert.strictEqual(refused._tag, "EngineUnavailable")
        yield* engine.dispatchWithReceipt(submit("second", "work.safe"), { origin: "internal" })
        yield* running.open
        yield* eventually(
          rowIs("job:first", (r) => r.status === "succeeded"),
          "running effect settled below the floor"
        )
        for (let i = 0; i < 5; i++) {
          yield* TestClock.adjust("1 second")
          yield* settle
        }
        assert.strictEqual((yield* Outbox.find("job:second"))!.status, "pending")
        assert.deepStrictEqual(handler.performed, ["job:first#1"])
        probe.state.free = 10_000
        yield* TestClock.adjust("1 second")
        yield* eventually(
          rowIs("job:second", (r) => r.status === "succeeded"),
          "resumed"
        )
      }).pipe(Effect.provide(stack([testReactor(handler.handle)]).pipe(Layer.provide(probe.layer))))
    }
  )
})

describe("graceful shutdown", () => {
  it.effect(
    "in-flight effects finish or are handed back per policy; nothing is left undefined; dispatch after close is refused",
    () => {
      const handler = scriptedHandler()
      const finishing = gated("made it")
      handler.behaviors.set("job:finishes", finishing.behavior)
      handler.behaviors.set("job:safe", () => Effect.never)
      handler.behaviors.set("job:bound", () => Effect.never)
      return Effect.gen(function* () {
        const scope = yield* Scope.make()
        const context = yield* Layer.buildWithScope(
          stackOverStore([testReactor(handler.handle, { shutdownGrace: "2 seconds" })]),
          scope
        )
        const engine = context.unsafeMap.get(Engine.Engine.key) as Engine.EngineShape
        for (const [job, kind] of [
          ["finishes", "work.safe"],
          ["safe", "work.safe"],
          ["bound", "work.bound"]
        ] as const) {
          yield* engine.dispatchWithReceipt(submit(job, kind))
        }
        yield* eventually(
          Effect.sync(() => handler.performed.length === 3),
          "all three running"
        )
        const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
        yield* settle
        const refused = yield* Effect.flip(engine.dispatchWithReceipt(submit("late", "work.safe")))
        assert.instanceOf(refused, EngineUnavailable)
        yield* finishing.open
        yield* TestClock.adjust("2 seconds")
        yield* closing.await
        const rows = Object.fromEntries((yield* Outbox.list()).map((r) => [r.effectId, [r.status, r.leaseOwner]]))
        assert.deepStrictEqual(rows, {
          "job:finishes": ["succeeded", null],
          "job:safe": ["pending", null],
          // Left for boot reconcile, which fails it with its stored reason.
          "job:bound": ["running", "owner-A"]
        })
      }).pipe(Effect.provide(TestStore.layer({ filename: ":memory:" })))
    }
  )

  it.effect(
    "after stopAdmitting, an outcome arriving in the last instant of the grace is recorded, not left for reconcile",
    () => {
      const handler = scriptedHandler()
      const gates = Object.fromEntries(["first", "held", "last"].map((job) => [job, gated(job)]))
      for (const [job, gate] of Object.entries(gates)) handler.behaviors.set(`job:${job}`, gate.behavior)
      // Holds a batch open after its commit, before its commands are answered.
      const hold = {
        armed: false,
        reached: Effect.runSync(Deferred.make<void>()),
        release: Effect.runSync(Deferred.make<void>())
      }
      const faults = Layer.succeed(FaultPoints.FaultPoints, {
        enabled: true,
        hit: (point) =>
          point === "dispatch.after-commit" && hold.armed
            ? Deferred.succeed(hold.reached, undefined).pipe(Effect.zipRight(Deferred.await(hold.release)))
            : Effect.void
      })
      return Effect.gen(function* () {
        const scope = yield* Scope.make()
        const stackLayer = stackOverStore([testReactor(handler.handle, { shutdownGrace: "2 seconds" })]).pipe(
          Layer.provide(faults)
        )
        const context = yield* Layer.buildWithScope(stackLayer, scope)
        const engine = context.unsafeMap.get(Engine.Engine.key) as Engine.EngineShape
        for (const job of Object.keys(gates)) yield* engine.dispatchWithReceipt(submit(job, "work.bound"))
        yield* eventually(
          Effect.sync(() => handler.performed.length === 3),
          "all three running"
        )
        // The server's first step of shutdown; settlements still land while reactors finish.
        yield* engine.stopAdmitting
        yield* gates.first!.open
        yield* eventually(
          rowIs("job:first", (r) => r.status === "succeeded"),
          "first settled while draining"
        )
        // One settle's batch is still open when the last outcome arrives behind it.
        hold.armed = true
        yield* gates.held!.open
        yield* Deferred.await(hold.reached)
        hold.armed = false
        yield* gates.last!.open
        yield* eventually(
          Effect.map(engine.stats, (stats) => stats.queueDepth === 1),
          "last outcome queued"
        )
        const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
        yield* settle
        yield* TestClock.adjust("2 seconds")
        yield* settle
        yield* Deferred.succeed(hold.release, undefined)
        yield* closing.await
        const rows = Object.fromEntries((yield* Outbox.list()).map((r) => [r.effectId, [r.status, r.response]]))
        assert.deepStrictEqual(rows, {
          "job:first": ["succeeded", "first"],
          "job:held": ["succeeded", "held"],
          "job:last": ["succeeded", "last"]
        })
      }).pipe(Effect.provide(TestStore.layer({ filename: ":memory:" })))
    }
  )
})
