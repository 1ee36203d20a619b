import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import { Engine, Receipts, StorageFaults, Timers } from "../src/index.js"
import { driverError } from "../src/storage/StorageFaults.js"
import * as TestStore from "../src/testing/TestStore.js"
import { tempDbFile } from "./fixtures/harness.js"
import { eventually, settle, stackOverStore } from "./fixtures/reactors.js"
import { Reminder } from "./fixtures/Reminders.js"

const engine = { engine: { aggregates: [Reminder], projections: [] } }
const stack = (filename = ":memory:") =>
  stackOverStore([], engine).pipe(Layer.provideMerge(TestStore.layer({ filename })))

const set = (commandId: string, timerId: string, at: number, ownerId = "o-1") => ({
  commandId,
  type: "reminder.set",
  ownerId,
  timerId,
  at
})

const fired = (ownerId = "o-1") =>
  Effect.gen(function* () {
    const e = yield* Engine.Engine
    const events = yield* e.readEvents()
    return events
      .filter((r) => r.aggregateId === ownerId && r.type === "reminder.fired")
      .map((r) => r.payload as { timerId: string; at: number })
  })

const firedCount = (n: number, ownerId = "o-1") => Effect.map(fired(ownerId), (f) => f.length === n)

/** What the owner was told of its timers that could not fire (its `onTimerFailed` records them). */
const toldFailed = (ownerId = "o-1") =>
  Effect.gen(function* () {
    const e = yield* Engine.Engine
    const events = yield* e.readEvents()
    return events
      .filter((r) => r.aggregateId === ownerId && r.type === "reminder.timer-failed")
      .map((r) => r.payload as { timerId: string; at: number; reason: string })
  })

/** Timer t1 of owner o-1, due at 5 s, with its stored command replaced by `command` (as a hand edit would). */
const scheduledWithCommand = (command: string) =>
  Effect.gen(function* () {
    yield* (yield* Engine.Engine).dispatchWithReceipt(set("s-1", "t1", 5_000))
    yield* (yield* SqlClient)`UPDATE timers SET command = ${command} WHERE timer_id = 't1'`
  })

/** Timers t1, t2 and t3 of owner o-1, all due at 5 s. */
const threeDueTogether = Effect.flatMap(Engine.Engine, (e) =>
  Effect.forEach(["t1", "t2", "t3"], (timerId, i) => e.dispatchWithReceipt(set(`s-${i + 1}`, timerId, 5_000)), {
    discard: true
  })
)

/** Whether the owner's one timer has this many tries counted against it. */
const attemptsAre = (n: number) => Effect.map(Timers.ofAggregate("reminder", "o-1"), ([row]) => row?.attempts === n)

describe("durable timers under TestClock", () => {
  it.effect("a timer fires once at its time, not a millisecond before", () =>
    Effect.gen(function* () {
      const e = yield* Engine.Engine
      yield* e.dispatchWithReceipt(set("s-1", "t1", 5_000))
      yield* TestClock.adjust("4999 millis")
      yield* settle
      assert.deepStrictEqual(yield* fired(), [])
      yield* TestClock.adjust("1 millis")
      yield* eventually(firedCount(1), "fired")
      yield* TestClock.adjust("1 minute")
      yield* settle
      assert.deepStrictEqual(yield* fired(), [{ type: "reminder.fired", timerId: "t1", at: 5_000 }] as never)
      const [row] = yield* Timers.ofAggregate("reminder", "o-1")
      assert.strictEqual(row!.status, "fired")
      const receipt = yield* Receipts.find(["timer:reminder:o-1:t1#1"])
      assert.strictEqual(receipt.get("timer:reminder:o-1:t1#1")?.status, "accepted")
    }).pipe(Effect.provide(stack()))
  )

  it.effect("a moved timer fires at its new time only", () =>
    Effect.gen(function* () {
      const e = yield* Engine.Engine
      yield* e.dispatchWithReceipt(set("s-1", "t1", 5_000))
      yield* TestClock.adjust("1 second")
      yield* e.dispatchWithReceipt(set("s-2", "t1", 8_000))
      yield* TestClock.adjust("4 seconds")
      yield* settle
      assert.deepStrictEqual(yield* fired(), [])
      yield* TestClock.adjust("2999 millis")
      yield* settle
      assert.deepStrictEqual(yield* fired(), [])
      yield* TestClock.adjust("1 millis")
      yield* eventually(firedCount(1), "fired")
      yield* TestClock.adjust("1 minute")
      yield* settle
      const all = yield* fired()
      assert.deepStrictEqual(
        all.map((f) => f.at),
        [8_000]
      )
      const [row] = yield* Timers.ofAggregate("reminder", "o-1")
      assert.deepStrictEqual([row!.generation, row!.status], [2, "fired"])
    }).pipe(Effect.provide(stack()))
  )

  it.effect("a moved-earlier timer fires at its new, earlier time", () =>
    Effect.gen(function* () {
      const e = yield* Engine.Engine
      yield* e.dispatchWithReceipt(set("s-1", "t1", 60_000))
      yield* settle
      yield* e.dispatchWithReceipt(set("s-2", "t1", 2_000))
      yield* TestClock.adjust("1999 millis")
      yield* settle
      assert.deepStrictEqual(yield* fired(), [])
      yield* TestClock.adjust("1 millis")
      yield* eventually(firedCount(1), "fired")
      yield* TestClock.adjust("2 minutes")
      yield* settle
      assert.deepStrictEqual(
        (yield* fired()).map((f) => f.at),
        [2_000]
      )
    }).pipe(Effect.provide(stack()))
  )

  it.effect("a cancelled timer never fires", () =>
    Effect.gen(function* () {
      const e = yield* Engine.Engine
      yield* e.dispatchWithReceipt(set("s-1", "t1", 5_000))
      yield* e.dispatchWithReceipt({ commandId: "c-1", type: "reminder.cancel", ownerId: "o-1", timerId: "t1" })
      yield* TestClock.adjust("2 minutes")
      yield* settle
      assert.deepStrictEqual(yield* fired(), [])
      const [row] = yield* Timers.ofAggregate("reminder", "o-1")
      assert.strictEqual(row!.status, "cancelled")
    }).pipe(Effect.provide(stack()))
  )

  // Cut off, or JSON that is no command object: either has nothing to dispatch (a number spread into
  // a command gave just its id, a list its indices), so both are unreadable, not an invalid command.
  const damagedCommands = [
    ["is not JSON", '{"type":"reminder.fire', /^its stored command is not JSON \(/],
    ["is a number", "42", /^its stored command does not have the expected shape \(expected an object\)$/],
    ["is a list", '["reminder.fire"]', /^its stored command does not have the expected shape \(expected an object\)$/],
    ["is null", "null", /^its stored command does not have the expected shape \(expected an object\)$/]
  ] as const
  for (const [what, damaged, why] of damagedCommands)
    it.effect(`a timer whose stored command ${what} is marked failed; the timers due with it fire`, () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient
        // given three timers due at one time, one of them damaged in the store (cut off, edited by hand)
        yield* threeDueTogether
        yield* sql`UPDATE timers SET command = ${damaged} WHERE timer_id = 't2'`
        assert.match(
          (yield* Timers.ofAggregate("reminder", "o-1")).find((r) => r.timerId === "t2")?.undecodable ?? "",
          why
        )
        // when their time comes
        yield* TestClock.adjust("5 seconds")
        // then the two readable ones fire, and the damaged one is failed for good, not claimed again forever
        yield* eventually(firedCount(2), "the readable timers fired")
        const rows = yield* Timers.ofAggregate("reminder", "o-1")
        assert.deepStrictEqual(rows.map((r) => [r.timerId, r.status]).sort(), [
          ["t1", "fired"],
          ["t2", "failed"],
          ["t3", "fired"]
        ])
        // and its owner is told, so a chain built on it does not stop in silence
        assert.deepStrictEqual(yield* toldFailed(), [
          { type: "reminder.timer-failed", timerId: "t2", at: 5_000, reason: "unreadable" }
        ] as never)
      }).pipe(Effect.provide(stack()))
    )

  it.effect("a timer whose command is refused as invalid is marked failed and its owner is told, once", () =>
    Effect.gen(function* () {
      // given a timer whose stored command this version refuses (written by an older one, without timerId)
      yield* scheduledWithCommand('{"ownerId":"o-1","type":"reminder.fire"}')
      // when its time comes
      yield* TestClock.adjust("5 seconds")
      // then the owner's onTimerFailed records it, and the row is failed, never claimed again
      yield* eventually(
        Effect.map(toldFailed(), (told) => told.length === 1),
        "the owner was told"
      )
      yield* TestClock.adjust("2 minutes")
      yield* settle
      assert.deepStrictEqual(yield* toldFailed(), [
        { type: "reminder.timer-failed", timerId: "t1", at: 5_000, reason: "invalid-command" }
      ] as never)
      assert.deepStrictEqual(yield* fired(), [])
      const [row] = yield* Timers.ofAggregate("reminder", "o-1")
      assert.strictEqual(row!.status, "failed")
    }).pipe(Effect.provide(stack()))
  )

  it.effect(
    "a timer whose command its decider throws on is tried a bounded number of times, then failed and told",
    () =>
      Effect.gen(function* () {
        // given a timer whose command makes its aggregate's decider throw (a bug in domain code: every try the same)
        yield* scheduledWithCommand('{"ownerId":"o-1","type":"reminder.boom"}')
        // when its time comes, and each claim's lease after it, for as long as ten leases
        yield* TestClock.adjust("5 seconds")
        for (let lease = 0; lease < 10 && (yield* toldFailed()).length === 0; lease++) {
          yield* settle
          yield* TestClock.adjust("30 seconds")
        }
        // then it was tried five times, not forever: the row is failed and its owner told why, once
        yield* eventually(
          Effect.map(toldFailed(), (told) => told.length === 1),
          "the owner was told"
        )
        yield* TestClock.adjust("10 minutes")
        yield* settle
        assert.deepStrictEqual(yield* toldFailed(), [
          { type: "reminder.timer-failed", timerId: "t1", at: 5_000, reason: "defect" }
        ] as never)
        const [row] = yield* Timers.ofAggregate("reminder", "o-1")
        assert.deepStrictEqual([row!.status, row!.attempts], ["failed", 5])
      }).pipe(Effect.provide(stack()))
  )

  it.effect("a defect's tries are counted on the row, so a restart does not start them again (file store)", () => {
    const file = tempDbFile()
    const boom = Effect.flatMap(
      SqlClient,
      (sql) => sql`UPDATE timers SET command = '{"ownerId":"o-1","type":"reminder.boom"}' WHERE timer_id = 't1'`
    )
    return Effect.gen(function* () {
      // given a timer whose fire throws in its decider, tried twice by a process that then stops
      yield* Effect.gen(function* () {
        const e = yield* Engine.Engine
        yield* e.dispatchWithReceipt(set("s-1", "t1", 5_000))
        yield* boom
        yield* TestClock.adjust("5 seconds")
        yield* eventually(attemptsAre(1), "the first try")
        yield* TestClock.adjust("30 seconds")
        yield* eventually(attemptsAre(2), "the second try")
      }).pipe(Effect.provide(stack(file)))
      // when the next process comes up and tries it again, a lease apart (at once on SQLite: its claims are dropped)
      yield* Effect.gen(function* () {
        for (let lease = 0; lease < 10 && (yield* toldFailed()).length === 0; lease++) {
          yield* settle
          yield* TestClock.adjust("30 seconds")
        }
        // then the fifth try in all is its last: failed and its owner told, not five more tries from the restart
        yield* eventually(
          Effect.map(toldFailed(), (told) => told.length === 1),
          "the owner was told"
        )
        const [row] = yield* Timers.ofAggregate("reminder", "o-1")
        assert.deepStrictEqual([row!.status, row!.attempts], ["failed", 5])
      }).pipe(Effect.provide(stack(file)))
    })
  })

  it.effect("a timer whose owner's onTimerFailed throws is marked failed, not told again forever", () =>
    Effect.gen(function* () {
      const e = yield* Engine.Engine
      const sql = yield* SqlClient
      // given a timer whose command is refused as invalid, and whose owner throws on being told so
      yield* e.dispatchWithReceipt(set("s-1", "deaf", 5_000))
      yield* sql`UPDATE timers SET command = '{"ownerId":"o-1","type":"reminder.fire"}' WHERE timer_id = 'deaf'`
      // when its time comes
      yield* TestClock.adjust("5 seconds")
      // then the row is failed at once (the error logged), and neither fired nor claimed again
      yield* eventually(
        Effect.map(Timers.ofAggregate("reminder", "o-1"), ([row]) => row?.status === "failed"),
        "the timer failed"
      )
      yield* TestClock.adjust("10 minutes")
      yield* settle
      assert.deepStrictEqual(yield* toldFailed(), [])
      const receipts = yield* Receipts.find(["timer:reminder:o-1:deaf#1:failed"])
      assert.strictEqual(receipts.size, 0)
    }).pipe(Effect.provide(stack()))
  )

  it.effect("a timer whose decider throws does not hold back the timers due with it", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient
      // given three timers due at one time, the first of which makes its decider throw
      yield* threeDueTogether
      yield* sql`UPDATE timers SET command = '{"ownerId":"o-1","type":"reminder.boom"}' WHERE timer_id = 't1'`
      // when their time comes
      yield* TestClock.adjust("5 seconds")
      // then the other two fire at once, not after the first one's claim ends (nor never, as it comes back first)
      yield* eventually(firedCount(2), "the timers due with the poisoned one fired")
      const rows = yield* Timers.ofAggregate("reminder", "o-1")
      assert.deepStrictEqual(
        rows.map((r) => [r.timerId, r.status, r.attempts]),
        [
          ["t1", "pending", 1],
          ["t2", "fired", 0],
          ["t3", "fired", 0]
        ]
      )
    }).pipe(Effect.provide(stack()))
  )

  it.effect("a timer the store refuses for now is tried again, uncounted, and does not hold back the others", () => {
    const refusing = { armed: true }
    const faults = Layer.succeed(StorageFaults, {
      before: (point, commandId) =>
        refusing.armed && point === "events" && commandId.startsWith("timer:reminder:o-1:t1#")
          ? Effect.fail(driverError("SQLITE_IOERR_WRITE", "SQLITE_IOERR_WRITE: injected at events"))
          : Effect.void
    })
    return Effect.gen(function* () {
      // given three timers due at one time, the store refusing the first one's fire (a failing write)
      yield* threeDueTogether
      // when their time comes, and the loop's pause after a refusal passes
      yield* TestClock.adjust("5 seconds")
      yield* settle
      yield* TestClock.adjust("1 second")
      // then the other two fire, not after the first one's claim ends
      yield* eventually(firedCount(2), "the timers due with the refused one fired")
      // and the refused one is tried again once the store takes writes, with no try counted against it
      refusing.armed = false
      yield* TestClock.adjust("30 seconds")
      yield* eventually(firedCount(3), "the refused timer fired")
      const rows = yield* Timers.ofAggregate("reminder", "o-1")
      assert.deepStrictEqual(
        rows.map((r) => [r.timerId, r.status, r.attempts]),
        [
          ["t1", "fired", 0],
          ["t2", "fired", 0],
          ["t3", "fired", 0]
        ]
      )
      assert.deepStrictEqual(yield* toldFailed(), [])
    }).pipe(Effect.provide(stack().pipe(Layer.provideMerge(faults))))
  })

  it.effect("a client cannot dispatch under the timer: prefix", () =>
    Effect.gen(function* () {
      const e = yield* Engine.Engine
      const error = yield* Effect.flip(
        e.dispatchWithReceipt({
          commandId: "timer:reminder:o-1:t1#1",
          type: "reminder.fire",
          ownerId: "o-1",
          timerId: "t1"
        })
      )
      assert.strictEqual(error._tag, "InvalidCommand")
    }).pipe(Effect.provide(stack()))
  )

  it.effect("overdue timers fire at boot in order of their time, each once (file store, reopened)", () => {
    const file = tempDbFile()
    return Effect.gen(function* () {
      yield* Effect.gen(function* () {
        const e = yield* Engine.Engine
        yield* e.dispatchWithReceipt(set("s-3", "late", 3_000))
        yield* e.dispatchWithReceipt(set("s-1", "early", 1_000))
        yield* e.dispatchWithReceipt(set("s-2", "middle", 2_000))
      }).pipe(
        Effect.provide(
          stackOverStore([], { ...engine, activation: "on-boot" }).pipe(
            Layer.provideMerge(TestStore.layer({ filename: file })),
            // Down before any is due: this process never fires them.
            Layer.provide(Layer.empty)
          )
        )
      )
      // The clock moves while the server is down.
      yield* TestClock.adjust("10 seconds")
      yield* Effect.gen(function* () {
        yield* eventually(firedCount(3), "three fired")
        yield* TestClock.adjust("1 minute")
        yield* settle
        assert.deepStrictEqual(
          (yield* fired()).map((f) => f.timerId),
          ["early", "middle", "late"]
        )
      }).pipe(Effect.provide(stack(file)))
      // A third boot fires nothing again.
      yield* Effect.gen(function* () {
        yield* TestClock.adjust("1 minute")
        yield* settle
        assert.strictEqual((yield* fired()).length, 3)
        const sql = yield* SqlClient
        const rows = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM timers WHERE status = 'fired'`
        assert.strictEqual(Number(rows[0]!.n), 3)
      }).pipe(Effect.provide(stack(file)))
    })
  })
})

describe("why a timer could not fire, kept on its row for an operator", () => {
  /** The owner's one timer, once it is marked failed. */
  const failedRow = (ownerId = "o-1") =>
    Effect.gen(function* () {
      yield* eventually(
        Effect.map(Timers.ofAggregate("reminder", ownerId), ([row]) => row?.status === "failed"),
        "the timer failed"
      )
      const [row] = yield* Timers.ofAggregate("reminder", ownerId)
      return row!
    })

  it.effect("a timer refused as invalid keeps its reason and message on its row; moving it clears them", () =>
    Effect.gen(function* () {
      const e = yield* Engine.Engine
      // given a timer whose stored command this version refuses
      yield* scheduledWithCommand('{"ownerId":"o-1","type":"reminder.fire"}')
      // when its time comes and it is failed
      yield* TestClock.adjust("5 seconds")
      const row = yield* failedRow()
      // then the row says why, as its owner was told
      assert.deepStrictEqual(row.failure, { reason: "invalid-command", message: "invalid 'reminder.fire' command" })
      // and a new schedule of the same timer is a new generation with no failure of its own
      yield* e.dispatchWithReceipt(set("s-2", "t1", 60_000))
      const [moved] = yield* Timers.ofAggregate("reminder", "o-1")
      assert.deepStrictEqual(
        [moved!.generation, moved!.status, moved!.attempts, moved!.failure],
        [2, "pending", 0, undefined]
      )
    }).pipe(Effect.provide(stack()))
  )

  it.effect("a timer whose stored command is not JSON keeps reason unreadable and why on its row", () =>
    Effect.gen(function* () {
      yield* scheduledWithCommand('{"type":"reminder.fire')
      yield* TestClock.adjust("5 seconds")
      const row = yield* failedRow()
      assert.strictEqual(row.failure?.reason, "unreadable")
      assert.isAbove(row.failure!.message.length, 0)
    }).pipe(Effect.provide(stack()))
  )

  it.effect("a defect's message is kept cut at the tell's bound, with its tries", () =>
    Effect.gen(function* () {
      // given a timer whose decider throws an error with a stack-sized message, at every try
      const why = "x".repeat(10_000)
      yield* scheduledWithCommand(JSON.stringify({ ownerId: "o-1", type: "reminder.boom", why }))
      // when its tries run out
      yield* TestClock.adjust("5 seconds")
      for (let lease = 0; lease < 10 && (yield* toldFailed()).length === 0; lease++) {
        yield* settle
        yield* TestClock.adjust("30 seconds")
      }
      const row = yield* failedRow()
      // then the row keeps a line an operator reads: the reason, the tries, and the error cut at 2,000 characters
      assert.strictEqual(row.failure?.reason, "defect")
      assert.strictEqual(row.failure?.message.length, 2_000)
      assert.match(row.failure!.message, /^failed in its aggregate's code at each of 5 tries; the last: .*xxx…$/)
    }).pipe(Effect.provide(stack()))
  )

  it.effect("failed timers are listed most recently failed first, at most the limit asked, with why", () =>
    Effect.gen(function* () {
      const e = yield* Engine.Engine
      const sql = yield* SqlClient
      // given timers of two owners failing at different times, and one that fires
      yield* e.dispatchWithReceipt(set("s-1", "first", 5_000, "o-1"))
      yield* e.dispatchWithReceipt(set("s-2", "second", 7_000, "o-2"))
      yield* e.dispatchWithReceipt(set("s-3", "fine", 6_000, "o-1"))
      yield* sql`UPDATE timers SET command = '{"type":"reminder.fire' WHERE timer_id = 'first'`
      yield* sql`UPDATE timers SET command = '{"ownerId":"o-2","type":"reminder.fire"}' WHERE timer_id = 'second'`
      yield* TestClock.adjust("5 seconds")
      yield* eventually(
        Effect.map(Timers.list({ status: "failed" }), (rows) => rows.length === 1),
        "the first failed"
      )
      yield* TestClock.adjust("2 seconds")
      yield* eventually(
        Effect.map(Timers.list({ status: "failed" }), (rows) => rows.length === 2),
        "the second failed"
      )
      // when an operator lists the failed timers
      const failed = yield* Timers.list({ status: "failed", limit: 10 })
      // then the newest failure comes first, each with its reason, and only failed ones
      assert.deepStrictEqual(
        failed.map((r) => [r.aggregateId, r.timerId, r.status, r.failure?.reason, r.updatedAt]),
        [
          ["o-2", "second", "failed", "invalid-command", 7_000],
          ["o-1", "first", "failed", "unreadable", 5_000]
        ]
      )
      // and a limit is honoured
      assert.deepStrictEqual(
        (yield* Timers.list({ status: "failed", limit: 1 })).map((r) => r.timerId),
        ["second"]
      )
      assert.deepStrictEqual(
        (yield* Timers.list({ status: "fired" })).map((r) => [r.timerId, r.failure]),
        [["fine", undefined]]
      )
    }).pipe(Effect.provide(stack()))
  )
})

describe("waits: an answer and a deadline race; exactly one wins", () => {
  const request = { commandId: "r-1", type: "approval.request", ownerId: "o-1", name: "deploy", deadline: 10_000 }
  const answer = { commandId: "a-1", type: "approval.answer", ownerId: "o-1", name: "deploy", verdict: "yes" }
  const types = Effect.gen(function* () {
    const e = yield* Engine.Engine
    return (yield* e.readEvents()).map((r) => r.type)
  })

  it.effect("answered before the deadline: the answer wins, the late timeout is a stored rejection", () =>
    Effect.gen(function* () {
      const e = yield* Engine.Engine
      yield* e.dispatchWithReceipt(request)
      yield* TestClock.adjust("5 seconds")
      yield* e.dispatchWithReceipt(answer)
      yield* TestClock.adjust("1 minute")
      yield* settle
      assert.deepStrictEqual(yield* types, ["approval.requested", "approval.answered"])
      // A fire already in flight when the answer landed: the same command the timer holds.
      const late = yield* Effect.flip(
        e.dispatchWithReceipt(
          {
            commandId: "timer:reminder:o-1:wait.deploy#1",
            type: "approval.timeout",
            ownerId: "o-1",
            wait: "deploy",
            token: "r-1"
          },
          { origin: "internal" }
        )
      )
      assert.deepStrictEqual([late._tag, (late as { reason?: string }).reason], ["CommandRejected", "wait-closed"])
      const receipt = (yield* Receipts.find(["timer:reminder:o-1:wait.deploy#1"])).get(
        "timer:reminder:o-1:wait.deploy#1"
      )
      assert.deepStrictEqual([receipt?.status, receipt?.rejection?.reason], ["rejected", "wait-closed"])
      assert.deepStrictEqual(yield* types, ["approval.requested", "approval.answered"])
    }).pipe(Effect.provide(stack()))
  )

  it.effect("the deadline passes first: the timeout wins, the late answer is a stored rejection", () =>
    Effect.gen(function* () {
      const e = yield* Engine.Engine
      yield* e.dispatchWithReceipt(request)
      yield* TestClock.adjust("9999 millis")
      yield* settle
      assert.deepStrictEqual(yield* types, ["approval.requested"])
      yield* TestClock.adjust("1 millis")
      yield* eventually(
        Effect.map(types, (t) => t.length === 2),
        "expired"
      )
      const late = yield* Effect.flip(e.dispatchWithReceipt(answer))
      assert.deepStrictEqual([late._tag, (late as { reason?: string }).reason], ["CommandRejected", "wait-closed"])
      const receipt = (yield* Receipts.find(["a-1"])).get("a-1")
      assert.deepStrictEqual([receipt?.status, receipt?.rejection?.reason], ["rejected", "wait-closed"])
      assert.deepStrictEqual(yield* types, ["approval.requested", "approval.expired"])
      const state = (yield* e.readEvents()).length
      assert.strictEqual(state, 2)
    }).pipe(Effect.provide(stack()))
  )
})
