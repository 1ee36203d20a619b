import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Deferred, Effect, Queue, Schema, Scope, Stream, TestClock } from "effect"
import * as CancelWatch from "../src/CancelWatch.js"
import { Aggregate, Decision, Engine } from "../src/index.js"
import * as Outbox from "../src/Outbox.js"
import * as OutboxTouches from "../src/OutboxTouches.js"
import * as StreamChunks from "../src/StreamChunks.js"
import { type Breakage, dyingSql } from "./fixtures/dyingSql.js"
import { Job, jobsEngine, submit } from "./fixtures/Jobs.js"
import { eventually, scriptedHandler, settle, stack, testReactor } from "./fixtures/reactors.js"

const operator = (action: "retry" | "cancel", commandId: string, effectId: string, jobId: string) => ({
  type: `effect.${action}`,
  commandId,
  effectId,
  aggregateType: "job",
  aggregateId: jobId,
  by: "operator"
})

const rowIs = (effectId: string, predicate: (row: Outbox.OutboxRow) => boolean) =>
  Effect.map(Outbox.find(effectId), (row) => row !== undefined && predicate(row))

/** A handler that never ends by itself and counts how often it was interrupted. */
const blockedForever = () => {
  let interrupted = 0
  const behavior = () => Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => interrupted++)))
  return { behavior, interrupted: () => interrupted }
}

/** The lease (30 s) is renewed every 10 s: nothing here moves the TestClock, so no renewal ever runs. */
const neverEnding = { shutdownGrace: "0 millis" } as const

/**
 * j1 and j2 running under "me" at attempt 1, a watch rung only by hand, and a stop for each.
 * `cancelAndRing` cancels a row with a raw UPDATE, then rings the watch as its commit would.
 */
const twoRunning = (
  outboxChangeCount?: () => number,
  broken?: Breakage,
  touches?: OutboxTouches.OutboxTouches,
  clock?: Clock.Clock
) =>
  Effect.gen(function* () {
    const engine = yield* Engine.Engine
    yield* engine.activate
    yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
    yield* engine.dispatchWithReceipt(submit("j2", "work.safe"))
    const claimed = yield* Outbox.claim({
      kinds: ["work.safe"],
      owner: "me",
      now: 0,
      leaseMs: 60_000,
      limit: 10,
      after: 0
    })
    assert.strictEqual(claimed.length, 2)
    const rings = yield* Queue.unbounded<void>()
    const sql = yield* SqlClient
    const watch = yield* CancelWatch.make({
      ownerId: "me",
      changes: Effect.succeed(Stream.fromQueue(rings)),
      outboxChangeCount,
      touches
    }).pipe(
      // Its reads of the watched rows die while `broken` is armed.
      Effect.provideService(SqlClient, broken === undefined ? sql : dyingSql(sql, "lease_owner FROM outbox", broken)),
      Effect.withClock(clock ?? (yield* Effect.clock))
    )
    return {
      watch,
      ring: Queue.offer(rings, undefined),
      cancelAndRing: (effectId: string) =>
        Effect.zipRight(
          sql`UPDATE outbox SET status = 'cancelled' WHERE effect_id = ${effectId}`,
          Queue.offer(rings, undefined)
        ),
      stopOne: yield* Deferred.make<void>(),
      stopTwo: yield* Deferred.make<void>()
    }
  })

/**
 * Two effects race, each in its own lane; the first to stream "won" cancels the other. Its cancel is
 * decided by `onStream`, in the commit of a stream chunk.
 */
const RaceEvent = Schema.Union(Aggregate.event("race.started", {}), Aggregate.event("race.won", { by: Schema.String }))
type RaceEvent = typeof RaceEvent.Type
const Race = Aggregate.make({
  name: "race",
  commands: { "race.start": Aggregate.command("race.start", { raceId: Schema.String }) },
  events: RaceEvent,
  aggregateId: (command) => command.raceId,
  initialState: {},
  evolve: (state: object) => state,
  decide: (_state, command) =>
    Decision.of<RaceEvent>({
      events: [{ type: "race.started" }],
      effects: ["a", "b"].map((runner) => ({
        id: `race:${command.raceId}:${runner}`,
        kind: "work.safe",
        payload: {},
        lane: `race:${command.raceId}:${runner}`
      }))
    }),
  onStream: (_state, chunk, ctx) =>
    chunk.text === "won"
      ? Decision.of<RaceEvent>({
          events: [{ type: "race.won", by: chunk.effectId }],
          cancel: ["a", "b"]
            .map((runner) => `race:${ctx.aggregateId}:${runner}`)
            .filter((effectId) => effectId !== chunk.effectId)
            .map((effectId) => ({ effectId, reason: "the other runner won" }))
        })
      : Decision.none()
})

/**
 * A relay: its first leg streams, and a chunk "pass" hands over to a second leg, a new effect of a
 * process-bound kind (never claimed at commit) decided by `onStream` in the chunk's commit.
 */
const RelayEvent = Schema.Union(Aggregate.event("relay.started", {}), Aggregate.event("relay.passed", {}))
type RelayEvent = typeof RelayEvent.Type
const Relay = Aggregate.make({
  name: "relay",
  commands: { "relay.start": Aggregate.command("relay.start", { relayId: Schema.String }) },
  events: RelayEvent,
  aggregateId: (command) => command.relayId,
  initialState: {},
  evolve: (state: object) => state,
  decide: (_state, command) =>
    Decision.of<RelayEvent>({
      events: [{ type: "relay.started" }],
      effects: [{ id: `relay:${command.relayId}:first`, kind: "work.safe", payload: {}, lane: "first" }]
    }),
  onStream: (_state, chunk, ctx) =>
    chunk.text === "pass"
      ? Decision.of<RelayEvent>({
          events: [{ type: "relay.passed" }],
          effects: [{ id: `relay:${ctx.aggregateId}:second`, kind: "work.bound", payload: {}, lane: "second" }]
        })
      : Decision.none()
})

/** The internal command a performer's flush sends: `text` as the first chunk of the effect's attempt 1. */
const firstChunk = (effectId: string, aggregateType: string, aggregateId: string, text: string) => ({
  type: "effect.stream",
  commandId: StreamChunks.chunkCommandId(effectId, 1, 0, text.length),
  effectId,
  aggregateType,
  aggregateId,
  attempt: 1,
  start: 0,
  text
})

describe("a cancel reaches the running handler at the commit's signal, not at the next lease renewal", () => {
  it.effect(
    "an operator's cancel of a running effect interrupts its handler and records when it started and after how long it stopped",
    () => {
      const handler = scriptedHandler()
      const blocked = blockedForever()
      handler.behaviors.set("job:j1", (row) => (row.attempts === 1 ? blocked.behavior() : Effect.succeed("second")))
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(submit("j1", "work.bound"))
        yield* eventually(
          rowIs("job:j1", (r) => r.status === "running"),
          "running"
        )
        yield* TestClock.adjust("1500 millis")
        yield* engine.dispatchWithReceipt(operator("cancel", "op-cancel-1", "job:j1", "j1"), { origin: "internal" })
        // The clock stays well short of the renewal (10 s): only the commit's signal can have reached the handler.
        yield* eventually(
          rowIs("job:j1", (r) => r.leaseOwner === null),
          "the owner stopped the handler and said so"
        )
        assert.strictEqual(blocked.interrupted(), 1)
        assert.strictEqual(handler.running(), 0)
        const row = (yield* Outbox.find("job:j1"))!
        assert.strictEqual(row.status, "cancelled")
        assert.deepStrictEqual(row.error, {
          message:
            "cancelled by an operator; it had started at 1970-01-01T00:00:00.000Z and was stopped after 1500 ms, so it may have partly run",
          code: "stopped-after-start",
          reason: "cancelled"
        })
        // Its performance is over, so the operator may start it again: one performance at a time.
        yield* engine.dispatchWithReceipt(operator("retry", "op-retry-1", "job:j1", "j1"), { origin: "internal" })
        yield* eventually(
          rowIs("job:j1", (r) => r.status === "succeeded"),
          "performed again"
        )
        assert.deepStrictEqual(handler.performed, ["job:j1#1", "job:j1#2"])
        assert.strictEqual(handler.maxRunning(), 1)
      }).pipe(Effect.provide(stack([testReactor(handler.handle, neverEnding)])))
    }
  )

  it.effect("a domain decision's cancel stops a running effect too, and cancels the pending one behind it", () => {
    const handler = scriptedHandler()
    const blocked = blockedForever()
    handler.behaviors.set("job:j1:0", blocked.behavior)
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      // Two effects in one lane: the first runs, the second waits behind it.
      yield* engine.dispatchWithReceipt(submit("j1", "work.safe", { count: 2, lane: "one" }))
      yield* eventually(
        rowIs("job:j1:0", (r) => r.status === "running"),
        "first claimed"
      )
      yield* engine.dispatchWithReceipt({
        commandId: "cancel-j1",
        type: "job.cancel",
        jobId: "j1",
        effectIds: ["job:j1:0", "job:j1:1"]
      })
      yield* eventually(
        rowIs("job:j1:0", (r) => r.leaseOwner === null),
        "the running one stopped"
      )
      assert.strictEqual(blocked.interrupted(), 1)
      const stopped = (yield* Outbox.find("job:j1:0"))!
      assert.strictEqual(stopped.status, "cancelled")
      assert.strictEqual((stopped.error as { code?: string }).code, "stopped-after-start")
      const pending = (yield* Outbox.find("job:j1:1"))!
      assert.deepStrictEqual(
        [pending.status, pending.error],
        ["cancelled", { message: "cancelled by the job", reason: "cancelled" }]
      )
      yield* settle
      assert.deepStrictEqual(handler.performed, ["job:j1:0#1"])
    }).pipe(Effect.provide(stack([testReactor(handler.handle, neverEnding)])))
  })
  it.effect("a stream chunk whose decision cancels another running effect rings too: its handler stops at once", () => {
    const handler = scriptedHandler()
    const blocked = blockedForever()
    handler.behaviors.set("race:r1:a", () => Effect.never)
    handler.behaviors.set("race:r1:b", blocked.behavior)
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt({ commandId: "start-r1", type: "race.start", raceId: "r1" })
      yield* eventually(
        Effect.map(Effect.all([Outbox.find("race:r1:a"), Outbox.find("race:r1:b")]), (rows) =>
          rows.every((row) => row?.status === "running")
        ),
        "both running"
      )
      yield* settle
      // when a's first chunk commits, and with it the race's decision to cancel b
      yield* engine.dispatchWithReceipt(firstChunk("race:r1:a", "race", "r1", "won"), { origin: "internal" })
      assert.strictEqual((yield* Outbox.find("race:r1:b"))?.status, "cancelled")
      // then b's handler stops with no clock moving: neither its watch's poll nor a renewal came
      yield* eventually(
        rowIs("race:r1:b", (r) => r.leaseOwner === null),
        "b's performer stopped its handler at the chunk's commit"
      )
      assert.strictEqual(blocked.interrupted(), 1)
    }).pipe(Effect.provide(stack([testReactor(handler.handle, neverEnding)], { engine: { aggregates: [Job, Race] } })))
  })
})

describe("a stream chunk whose decision adds effects", () => {
  it.effect("rings the outbox: a new effect no claim at commit took is performed at once, not at the poll", () => {
    const handler = scriptedHandler()
    handler.behaviors.set("relay:r1:first", () => Effect.never)
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt({ commandId: "start-r1", type: "relay.start", relayId: "r1" })
      yield* eventually(
        rowIs("relay:r1:first", (r) => r.status === "running"),
        "the first leg running"
      )
      yield* settle
      // The chunk's commit writes the second leg's row; process-bound, so its commit claims nothing.
      yield* engine.dispatchWithReceipt(firstChunk("relay:r1:first", "relay", "r1", "pass"), { origin: "internal" })
      assert.strictEqual((yield* Outbox.find("relay:r1:second"))?.status, "pending")
      // With no clock moving, the reactor's poll (an hour) never comes: only the commit's ring can wake it.
      yield* eventually(
        rowIs("relay:r1:second", (r) => r.status === "succeeded"),
        "the second leg performed after the chunk's commit"
      )
      assert.deepStrictEqual(handler.performed, ["relay:r1:first#1", "relay:r1:second#1"])
    }).pipe(
      Effect.provide(
        stack([testReactor(handler.handle, { ...neverEnding, pollInterval: "1 hour" })], {
          engine: { aggregates: [Job, Relay] }
        })
      )
    )
  })

  it.effect("a plain chunk (no effects, no cancels) still rings nothing", () => {
    const handler = scriptedHandler()
    handler.behaviors.set("relay:r1:first", () => Effect.never)
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt({ commandId: "start-r1", type: "relay.start", relayId: "r1" })
      yield* eventually(
        rowIs("relay:r1:first", (r) => r.status === "running"),
        "the first leg running"
      )
      yield* settle
      const before = engine.outboxTouches.mark()
      yield* engine.dispatchWithReceipt(firstChunk("relay:r1:first", "relay", "r1", "hello"), { origin: "internal" })
      assert.strictEqual(engine.outboxTouches.mark(), before)
    }).pipe(
      Effect.provide(
        stack([testReactor(handler.handle, { ...neverEnding, pollInterval: "1 hour" })], {
          engine: { aggregates: [Job, Relay] }
        })
      )
    )
  })
})

describe("a cancel whose signal was lost", () => {
  it.effect("is seen at the watch's targeted poll (500 ms), still long before the lease renewal", () => {
    const handler = scriptedHandler()
    const blocked = blockedForever()
    handler.behaviors.set("job:j1", blocked.behavior)
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(submit("j1", "work.bound"))
      yield* eventually(
        rowIs("job:j1", (r) => r.status === "running"),
        "running"
      )
      yield* settle
      // As a commit whose NOTIFY never arrived: the row changes in the store, and nothing rings.
      const sql = yield* SqlClient
      yield* sql`UPDATE outbox SET status = 'cancelled', error = ${JSON.stringify({ message: "cancelled elsewhere" })} WHERE effect_id = 'job:j1'`
      yield* settle
      assert.strictEqual(blocked.interrupted(), 0, "nothing rang, and the poll is not due yet")
      yield* TestClock.adjust("500 millis")
      yield* eventually(
        rowIs("job:j1", (r) => r.leaseOwner === null),
        "stopped at the poll"
      )
      assert.strictEqual(blocked.interrupted(), 1)
      const stopped = (yield* Outbox.find("job:j1"))!
      assert.match((stopped.error as { message: string }).message, /^cancelled elsewhere; it had started/)
    }).pipe(Effect.provide(stack([testReactor(handler.handle, neverEnding)])))
  })
})

describe("the watch's own loop", () => {
  it.scoped(
    "a cancel whose ring came before its performance was watched, while another was, is seen at once, not at the next poll",
    () =>
      Effect.gen(function* () {
        const { watch, cancelAndRing, stopOne, stopTwo } = yield* twoRunning()
        yield* watch.watch("job:j1", 1, Deferred.succeed(stopOne, undefined))
        yield* settle
        // j2 is cancelled and its commit rings before its performer registers the watch: the ring is
        // taken by a check that read only j1.
        yield* cancelAndRing("job:j2")
        yield* settle
        yield* watch.watch("job:j2", 1, Deferred.succeed(stopTwo, undefined))
        // No clock moves: the poll (500 ms) never comes.
        yield* eventually(Deferred.isDone(stopTwo), "j2's cancel seen without the poll")
        assert.isFalse(yield* Deferred.isDone(stopOne))
      }).pipe(Effect.provide(jobsEngine()))
  )

  it.scoped("a check that dies does not end the watch: the next ring reads again and stops the cancelled one", () =>
    Effect.gen(function* () {
      const broken = { armed: false, once: true }
      const { watch, ring, cancelAndRing, stopOne } = yield* twoRunning(undefined, broken)
      yield* watch.watch("job:j1", 1, Deferred.succeed(stopOne, undefined))
      yield* settle
      // given a check whose read dies
      broken.armed = true
      yield* cancelAndRing("job:j1")
      yield* settle
      assert.isFalse(broken.armed, "the check ran and died")
      assert.isFalse(yield* Deferred.isDone(stopOne))
      // when the next ring comes (no clock moves: not the poll)
      yield* ring
      // then the watch reads again and stops the cancelled performance
      yield* eventually(Deferred.isDone(stopOne), "the cancel seen after the check that died")
    }).pipe(Effect.provide(jobsEngine()))
  )

  it.scoped(
    "with the outbox's change count, a check reads only when the count moved or a performance was watched since the last read",
    () =>
      Effect.gen(function* () {
        // A count the test moves by hand: the raw UPDATEs do not move it, as if nothing had written.
        let count = 0
        const { watch, ring, cancelAndRing, stopOne, stopTwo } = yield* twoRunning(() => count)
        yield* watch.watch("job:j1", 1, Deferred.succeed(stopOne, undefined))
        yield* settle
        yield* cancelAndRing("job:j1")
        yield* settle
        assert.isFalse(yield* Deferred.isDone(stopOne), "the count had not moved and nothing new was watched: no read")
        // A performance watched since the last read: the next check reads, and sees j1's change too.
        yield* watch.watch("job:j2", 1, Deferred.succeed(stopTwo, undefined))
        yield* eventually(Deferred.isDone(stopOne), "read because j2 was watched")
        yield* cancelAndRing("job:j2")
        yield* settle
        assert.isFalse(yield* Deferred.isDone(stopTwo), "again nothing moved: no read")
        count++
        yield* ring
        yield* eventually(Deferred.isDone(stopTwo), "read because the count moved")
      }).pipe(Effect.provide(jobsEngine()))
  )
})

describe("the watch with the engine's touches", () => {
  it.scoped(
    "a ring whose commits named no watched row reads nothing; one that named a watched row, or any row, reads; the poll reads",
    () =>
      Effect.gen(function* () {
        const touches = OutboxTouches.make()
        const { watch, cancelAndRing, stopOne, stopTwo } = yield* twoRunning(undefined, undefined, touches)
        yield* watch.watch("job:j1", 1, Deferred.succeed(stopOne, undefined))
        yield* watch.watch("job:j2", 1, Deferred.succeed(stopTwo, undefined))
        yield* settle
        // given both rows cancelled by writes the commits behind the rings did not name
        touches.record(["job:other"])
        yield* cancelAndRing("job:j1")
        touches.record([])
        yield* cancelAndRing("job:j2")
        yield* settle
        // then no read ran: neither performance was stopped
        assert.isFalse(yield* Deferred.isDone(stopOne), "named another row: no read")
        assert.isFalse(yield* Deferred.isDone(stopTwo), "named none: no read")
        // when a commit names a watched row, the read sees both
        touches.record(["job:j2"])
        yield* cancelAndRing("job:j2")
        yield* eventually(Deferred.isDone(stopTwo), "read because j2 was named")
        assert.isTrue(yield* Deferred.isDone(stopOne), "the same read saw j1's change")
      }).pipe(Effect.provide(jobsEngine()))
  )

  it.scoped("a commit that could not name its rows (another process's) reads, and so does the poll", () =>
    Effect.gen(function* () {
      const touches = OutboxTouches.make()
      const { watch, cancelAndRing, ring, stopOne, stopTwo } = yield* twoRunning(undefined, undefined, touches)
      yield* watch.watch("job:j1", 1, Deferred.succeed(stopOne, undefined))
      yield* settle
      touches.record(undefined)
      yield* cancelAndRing("job:j1")
      yield* eventually(Deferred.isDone(stopOne), "read because a commit could not name its rows")
      yield* watch.watch("job:j2", 1, Deferred.succeed(stopTwo, undefined))
      yield* settle
      // A change nothing named or rang (a lost hint) is found by the poll.
      touches.record(["job:other"])
      yield* cancelAndRing("job:j2")
      yield* settle
      assert.isFalse(yield* Deferred.isDone(stopTwo))
      yield* TestClock.adjust("500 millis")
      yield* ring
      yield* eventually(Deferred.isDone(stopTwo), "read at the poll")
    }).pipe(Effect.provide(jobsEngine()))
  )

  it.scoped(
    "a performance watched while a check reads the clock keeps its claim's mark: a cancel named since then is seen at the next ring",
    () =>
      Effect.gen(function* () {
        const touches = OutboxTouches.make()
        // The test's clock, whose next read first runs `duringRead`: another fiber's turn, made certain.
        const base = yield* Effect.clock
        let duringRead: Effect.Effect<void> | undefined
        const clock: Clock.Clock = {
          [Clock.ClockTypeId]: Clock.ClockTypeId,
          unsafeCurrentTimeMillis: () => base.unsafeCurrentTimeMillis(),
          unsafeCurrentTimeNanos: () => base.unsafeCurrentTimeNanos(),
          currentTimeNanos: base.currentTimeNanos,
          sleep: (duration) => base.sleep(duration),
          currentTimeMillis: Effect.suspend(() => {
            const run = duringRead ?? Effect.void
            duringRead = undefined
            return Effect.zipRight(run, base.currentTimeMillis)
          })
        }
        const { watch, ring, stopOne, stopTwo } = yield* twoRunning(undefined, undefined, touches, clock)
        const sql = yield* SqlClient
        const scope = yield* Effect.scope
        // given j2's claim mark, taken before a commit that cancelled j2 and named it
        const j2ClaimedSince = touches.mark()
        yield* watch.watch("job:j1", 1, Deferred.succeed(stopOne, undefined), touches.mark())
        yield* settle
        yield* sql`UPDATE outbox SET status = 'cancelled' WHERE effect_id = 'job:j2'`
        touches.record(["job:j2"])
        // when j2's performer registers its watch while the next check reads the clock
        let registered = false
        duringRead = Effect.zipRight(
          watch.watch("job:j2", 1, Deferred.succeed(stopTwo, undefined), j2ClaimedSince),
          Effect.sync(() => {
            registered = true
          })
        ).pipe(Effect.provideService(Scope.Scope, scope))
        yield* ring
        // then the cancel named since its claim is seen at a ring (no clock moves: not the poll)
        yield* eventually(
          Effect.sync(() => registered),
          "j2 watched during the check's clock read"
        )
        yield* eventually(Deferred.isDone(stopTwo), "j2's cancel seen without the poll")
        assert.isFalse(yield* Deferred.isDone(stopOne))
      }).pipe(Effect.provide(jobsEngine()))
  )

  it.scoped(
    "the poll comes one interval after the last read, not one interval after a ring that skipped its read",
    () =>
      Effect.gen(function* () {
        const touches = OutboxTouches.make()
        const { watch, ring, stopOne } = yield* twoRunning(undefined, undefined, touches)
        const sql = yield* SqlClient
        // given j1 watched without a claim's mark: the watch reads it, at t = 0
        yield* watch.watch("job:j1", 1, Deferred.succeed(stopOne, undefined))
        yield* settle
        // and a ring at t = 400 ms whose commit named no watched row: no read
        yield* TestClock.adjust("400 millis")
        touches.record(["job:other"])
        yield* ring
        yield* settle
        // when j1 is cancelled by a commit nothing rang or named (a lost hint)
        yield* sql`UPDATE outbox SET status = 'cancelled' WHERE effect_id = 'job:j1'`
        yield* settle
        assert.isFalse(yield* Deferred.isDone(stopOne), "nothing rang, and the poll is not due yet")
        // then the poll due at t = 500 ms finds it, not one at 900 ms
        yield* TestClock.adjust("100 millis")
        yield* eventually(Deferred.isDone(stopOne), "read at the poll due 500 ms after the last read")
      }).pipe(Effect.provide(jobsEngine()))
  )

  it("remembers the last commits' rows; a reader further behind, or a commit without names, is told 'touched'", () => {
    const touches = OutboxTouches.make()
    const watched = (id: string) => id === "a"
    const start = touches.mark()
    assert.isFalse(touches.touchedSince(start, watched), "nothing recorded")
    touches.record(["b", "c"])
    assert.isFalse(touches.touchedSince(start, watched), "other rows only")
    touches.record(["a"])
    assert.isTrue(touches.touchedSince(start, watched))
    const afterA = touches.mark()
    assert.isFalse(touches.touchedSince(afterA, watched))
    touches.record(undefined)
    assert.isTrue(touches.touchedSince(afterA, watched), "a commit that named nothing may have touched anything")
    const later = touches.mark()
    for (let i = 0; i < 64; i++) touches.record(["b"])
    assert.isFalse(touches.touchedSince(later, watched), "64 commits back is still remembered")
    touches.record(["b"])
    assert.isTrue(touches.touchedSince(later, watched), "65 commits back is not: told 'touched'")
  })
})

describe("the watch's rules, given/when/then", () => {
  it("a row is still the watched performance only while it runs at that attempt under that owner", () => {
    const row = { status: "running", attempts: 2, leaseOwner: "w1" }
    assert.isTrue(CancelWatch.stillPerforming(row, 2, "w1"))
    assert.isFalse(CancelWatch.stillPerforming({ ...row, status: "cancelled" }, 2, "w1"))
    assert.isFalse(CancelWatch.stillPerforming(row, 1, "w1"))
    assert.isFalse(CancelWatch.stillPerforming({ ...row, leaseOwner: "w2" }, 2, "w1"))
    assert.isFalse(CancelWatch.stillPerforming(undefined, 2, "w1"))
  })

  it("a stopped performance keeps the cancel's reason and adds when it started and how long it ran", () => {
    assert.deepStrictEqual(CancelWatch.stoppedError({ message: "interrupted by the user" }, 1_000, 3_500), {
      message:
        "interrupted by the user; it had started at 1970-01-01T00:00:01.000Z and was stopped after 2500 ms, so it may have partly run",
      code: "stopped-after-start",
      reason: "cancelled"
    })
    assert.strictEqual(CancelWatch.stoppedError(null, 0, 0).message.split(";")[0], "cancelled")
  })
})
