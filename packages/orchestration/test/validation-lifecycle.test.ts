import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Option } from "effect"
import {
  AggregateUnavailable,
  CommandDefect,
  Engine,
  EngineUnavailable,
  FaultPoints,
  InvalidCommand
} from "../src/index.js"
import * as TestStore from "../src/testing/TestStore.js"
import { accountsConfig, engineLayer, rowCounts, tempDbFile, waitForQueueDepth } from "./fixtures/harness.js"

const open = (commandId: string, accountId = "acc-1") => ({ commandId, type: "account.open", accountId, owner: "ada" })

/** Lets other fibers run for a while without moving the clock. */
const yieldMany = Effect.gen(function* () {
  for (let i = 0; i < 500; i++) yield* Effect.yieldNow()
})

describe("bad input gets InvalidCommand and stores nothing", () => {
  const cases: ReadonlyArray<readonly [string, unknown, string]> = [
    ["not an object", "hello", "JSON object"],
    ["an array", [1, 2], "JSON object"],
    ["no command id", { type: "account.open", accountId: "a", owner: "o" }, "commandId"],
    ["an empty command id", { ...open(""), commandId: "" }, "1 to 128"],
    ["a 129-character id", open("x".repeat(129)), "1 to 128"],
    ["an id with a slash", open("../etc/passwd"), "may only contain"],
    ["an id with unicode", open("caf\u00e9"), "may only contain"],
    ["a reserved id prefix", open("outcome:tool:1#1"), "reserved"],
    ["a reserved type", { commandId: "x", type: "effect.succeed", effectId: "e" }, "internal"],
    ["an unknown type", { commandId: "x", type: "account.teleport", accountId: "a" }, "unknown command type"],
    ["a missing field", { commandId: "x", type: "account.open", accountId: "a" }, "invalid 'account.open'"],
    [
      "a wrong type",
      { commandId: "x", type: "account.deposit", accountId: "a", amount: "ten" },
      "invalid 'account.deposit'"
    ],
    ["an extra field", { ...open("x"), admin: true }, "invalid 'account.open'"]
  ]
  for (const [name, input, expected] of cases) {
    it.effect(name, () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const error = yield* Effect.flip(engine.dispatchWithReceipt(input))
        assert.instanceOf(error, InvalidCommand)
        assert.include(error.message, expected)
        assert.deepStrictEqual(yield* rowCounts, { events: 0, receipts: 0, outbox: 0, account_balances: 0 })
      }).pipe(Effect.provide(engineLayer()))
    )
  }

  it.effect("schema issues name the path of the bad field", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const error = yield* Effect.flip(
        engine.dispatchWithReceipt({ commandId: "x", type: "account.deposit", accountId: "a", amount: "ten" })
      )
      assert.deepStrictEqual(
        (error as InvalidCommand).issues.map((i) => i.path),
        [["amount"]]
      )
    }).pipe(Effect.provide(engineLayer()))
  )

  it.effect("the engine itself may use reserved prefixes and longer ids", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const answer = yield* engine.dispatchWithReceipt(open(`delegate:${"x".repeat(300)}`), { origin: "internal" })
      assert.strictEqual(answer.events.length, 1)
    }).pipe(Effect.provide(engineLayer()))
  )
})

describe("defects and quarantine", () => {
  it.effect("a decider that throws fails that command with CommandDefect and the processor keeps serving", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const error = yield* Effect.flip(
        engine.dispatchWithReceipt({ commandId: "boom", type: "account.explode", accountId: "acc-1" })
      )
      assert.instanceOf(error, CommandDefect)
      assert.strictEqual((error as CommandDefect).stage, "decide")
      assert.strictEqual((error as CommandDefect).aggregateId, "acc-1")
      assert.include(error.message, "decider bug")
      assert.strictEqual((yield* rowCounts).receipts, 0)
      const ok = yield* engine.dispatchWithReceipt(open("c-1"))
      assert.strictEqual(ok.events.length, 1)
    }).pipe(Effect.provide(engineLayer()))
  )

  it.effect("an aggregate whose stored events cannot be decoded is quarantined; others are served", () => {
    const file = tempDbFile()
    return Effect.gen(function* () {
      yield* Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(open("c-1", "bad"))
        yield* engine.dispatchWithReceipt(open("c-2", "good"))
        const sql = yield* SqlClient
        // Corrupt the stored event of one aggregate, as a bad migration would.
        yield* sql`UPDATE events SET payload = '{"type":"account.opened","owner":42}' WHERE aggregate_id = 'bad'`
      }).pipe(Effect.provide(engineLayer({ filename: file })))
      yield* Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const error = yield* Effect.flip(
          engine.dispatchWithReceipt({ commandId: "d-1", type: "account.deposit", accountId: "bad", amount: 1 })
        )
        assert.instanceOf(error, AggregateUnavailable)
        assert.include(error.message, "cannot be decoded")
        const ok = yield* engine.dispatchWithReceipt({
          commandId: "d-2",
          type: "account.deposit",
          accountId: "good",
          amount: 1
        })
        assert.strictEqual(ok.events.length, 1)
        assert.strictEqual((yield* engine.stats).quarantinedAggregates, 1)
        const decodeError = yield* Effect.flip(engine.decode((yield* engine.readEvents({ aggregateId: "bad" }))[0]!))
        assert.strictEqual(decodeError._tag, "UndecodableEvent")
      }).pipe(Effect.provide(engineLayer({ filename: file })))
    })
  })
})

describe("lifecycle", () => {
  it.effect("before activation, `fail` mode refuses with EngineUnavailable", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const error = yield* Effect.flip(engine.dispatchWithReceipt(open("c-1")))
      assert.instanceOf(error, EngineUnavailable)
      assert.strictEqual((error as EngineUnavailable).reason, "not-activated")
      yield* engine.activate
      assert.strictEqual((yield* engine.dispatchWithReceipt(open("c-1"))).duplicate, false)
    }).pipe(Effect.provide(engineLayer({ config: { activation: "manual", beforeActivation: "fail" } })))
  )

  it.effect("a full queue refuses with EngineUnavailable (overloaded) instead of growing", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const queued = yield* Effect.forEach([1, 2], (i) =>
        Effect.fork(engine.dispatchWithReceipt(open(`c-${i}`, `acc-${i}`)))
      )
      yield* waitForQueueDepth(2)
      const error = yield* Effect.flip(engine.dispatchWithReceipt(open("c-3", "acc-3")))
      assert.instanceOf(error, EngineUnavailable)
      assert.strictEqual((error as EngineUnavailable).reason, "overloaded")
      yield* engine.activate
      const answers = yield* Fiber.joinAll(queued)
      assert.strictEqual(answers.length, 2)
    }).pipe(Effect.provide(engineLayer({ config: { activation: "manual", queueCapacity: 2 } })))
  )

  it.effect("shutdown drains queued commands, then refuses new ones", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const queued = yield* Effect.forEach([1, 2, 3], (i) =>
        Effect.fork(engine.dispatchWithReceipt(open(`c-${i}`, `acc-${i}`)))
      )
      yield* waitForQueueDepth(3)
      yield* engine.activate
      yield* engine.shutdown
      const answers = yield* Fiber.joinAll(queued)
      assert.deepStrictEqual(
        answers.map((a) => a.duplicate),
        [false, false, false]
      )
      const error = yield* Effect.flip(engine.dispatchWithReceipt(open("c-4", "acc-4")))
      assert.instanceOf(error, EngineUnavailable)
      assert.strictEqual((error as EngineUnavailable).reason, "shutting-down")
    }).pipe(Effect.provide(engineLayer({ config: { activation: "manual" } })))
  )

  it.effect("commands still parked at shutdown are told, never left waiting", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const parked = yield* Effect.fork(Effect.flip(engine.dispatchWithReceipt(open("c-1"))))
      yield* waitForQueueDepth(1)
      yield* engine.shutdown
      const error = yield* Fiber.join(parked)
      assert.instanceOf(error, EngineUnavailable)
      assert.strictEqual((error as EngineUnavailable).reason, "shutting-down")
    }).pipe(Effect.provide(engineLayer({ config: { activation: "manual" } })))
  )

  it.effect(
    "after stopAdmitting, shutdown waits for the batch in flight and the internal commands that arrive meanwhile",
    () => {
      // A commit the test holds open after it wrote, before its commands are answered.
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
        const engine = yield* Engine.Engine
        const internal = { origin: "internal" } as const
        yield* engine.stopAdmitting
        // A batch while draining empties the queue: that is not the end of the drain.
        yield* engine.dispatchWithReceipt(open("c-1"), internal)
        hold.armed = true
        const inFlight = yield* Effect.fork(engine.dispatchWithReceipt(open("c-2", "acc-2"), internal))
        yield* Deferred.await(hold.reached)
        hold.armed = false
        const closing = yield* Effect.fork(engine.shutdown)
        yield* yieldMany
        assert.isTrue(Option.isNone(yield* Fiber.poll(closing)), "shutdown returned while a batch was in flight")
        // A settlement of running work arriving during the drain is still taken.
        const late = yield* Effect.fork(engine.dispatchWithReceipt(open("c-3", "acc-3"), internal))
        yield* yieldMany
        yield* Deferred.succeed(hold.release, undefined)
        yield* Fiber.join(closing)
        assert.deepStrictEqual(
          [(yield* Fiber.join(inFlight)).duplicate, (yield* Fiber.join(late)).duplicate],
          [false, false]
        )
        const refused = yield* Effect.flip(engine.dispatchWithReceipt(open("c-4", "acc-4"), internal))
        assert.instanceOf(refused, EngineUnavailable)
        assert.strictEqual((refused as EngineUnavailable).reason, "shutting-down")
        assert.deepStrictEqual((yield* rowCounts).receipts, 3)
      }).pipe(Effect.provide(engineLayer().pipe(Layer.provide(faults))))
    }
  )

  it.effect("stopAdmitting before activation with commands queued: shutdown tells them and returns", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const parked = yield* Effect.fork(Effect.flip(engine.dispatchWithReceipt(open("c-1"))))
      yield* waitForQueueDepth(1)
      yield* engine.stopAdmitting
      const closing = yield* Effect.fork(engine.shutdown)
      yield* yieldMany
      assert.isTrue(Option.isSome(yield* Fiber.poll(closing)), "shutdown waited for a processor that never started")
      const error = yield* Fiber.join(parked)
      assert.instanceOf(error, EngineUnavailable)
      assert.strictEqual((error as EngineUnavailable).reason, "shutting-down")
      assert.deepStrictEqual(yield* rowCounts, { events: 0, receipts: 0, outbox: 0, account_balances: 0 })
    }).pipe(Effect.provide(engineLayer({ config: { activation: "manual" } })))
  )

  it.effect("two aggregates may not declare the same command type", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(
        Effect.provide(
          Engine.Engine,
          Engine.layer({ aggregates: [...accountsConfig.aggregates, ...accountsConfig.aggregates] }).pipe(
            Layer.provide(TestStore.layer({ filename: ":memory:" }))
          )
        )
      )
      assert.strictEqual(exit._tag, "Failure")
    })
  )
})
