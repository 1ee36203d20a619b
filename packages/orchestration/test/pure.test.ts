import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Schema, TestClock } from "effect"
import {
  AggregateUnavailable,
  CanonicalJson,
  CommandDefect,
  CommandId,
  JsonDepth,
  CommandIdConflict,
  CommandRejected,
  EngineUnavailable,
  InvalidCommand,
  StorageFailure,
  EffectFailure,
  EffectOutcomes,
  FaultPoints,
  Reactor,
  Receipts,
  StorageErrors,
  StoredJson,
  TimerFailures,
  TimerLoop,
  Worker
} from "../src/index.js"
import type * as Outbox from "../src/Outbox.js"

describe("canonical JSON and fingerprints", () => {
  it("sorts keys at every depth and drops undefined, so key order never changes a fingerprint", () => {
    assert.strictEqual(
      CanonicalJson.canonicalJson({ b: 1, a: { d: [1, { z: 1, y: 2 }], c: undefined } }),
      '{"a":{"d":[1,{"y":2,"z":1}]},"b":1}'
    )
    assert.strictEqual(CanonicalJson.fingerprint({ a: 1, b: 2 }), CanonicalJson.fingerprint({ b: 2, a: 1 }))
    assert.notStrictEqual(CanonicalJson.fingerprint({ a: 1 }), CanonicalJson.fingerprint({ a: "1" }))
  })

  it("keeps the text and digest receipts already store, so a retry after an upgrade still matches", () => {
    // Written by the first implementation (sorted entries joined, sha256 by createHash); stored
    // receipts hold such digests, so any change here turns honest retries into conflicts.
    const command = {
      commandId: "c1",
      type: "account.deposit",
      accountId: "a1",
      amount: 5,
      memo: "",
      tags: ["x", null, { b: true, a: -0.5 }],
      skip: undefined
    }
    assert.strictEqual(
      CanonicalJson.canonicalJson(command),
      '{"accountId":"a1","amount":5,"commandId":"c1","memo":"","tags":["x",null,{"a":-0.5,"b":true}],"type":"account.deposit"}'
    )
    assert.strictEqual(
      CanonicalJson.fingerprint(command),
      "e31b6e679594074cdc745e86f92978fda4a2f14adcb30dd0c9991e5b34f479af"
    )
  })
})

describe("JSON depth", () => {
  it("given scalars, empty and nested values, when measured, then depth counts objects and arrays", () => {
    assert.isFalse(JsonDepth.deeperThan("x", 0))
    assert.isFalse(JsonDepth.deeperThan(null, 0))
    assert.isTrue(JsonDepth.deeperThan({}, 0))
    assert.isFalse(JsonDepth.deeperThan({}, 1))
    assert.isFalse(JsonDepth.deeperThan({ a: [1, { b: 2 }], c: "d" }, 3))
    assert.isTrue(JsonDepth.deeperThan({ a: [1, { b: [] }] }, 3))
  })

  it("given 100,000 levels, when measured, then it answers without overflowing the stack", () => {
    let value: unknown = 1
    for (let i = 0; i < 100_000; i++) value = { v: value }
    assert.isTrue(JsonDepth.deeperThan(value, JsonDepth.maxDepth))
    assert.isFalse(JsonDepth.deeperThan(value, 100_000))
  })
})

describe("command ids", () => {
  it("clients get 1-128 safe characters and no reserved prefix; the engine gets 512", () => {
    assert.isUndefined(CommandId.commandIdProblem("abc:DEF.1_2-3#4", "client"))
    assert.include(CommandId.commandIdProblem("a".repeat(129), "client")!, "1 to 128")
    assert.isUndefined(CommandId.commandIdProblem("a".repeat(129), "internal"))
    assert.include(CommandId.commandIdProblem("a".repeat(513), "internal")!, "1 to 512")
    assert.include(CommandId.commandIdProblem("reconcile:x#1", "client")!, "reserved")
    assert.isUndefined(CommandId.commandIdProblem("reconcile:x#1", "internal"))
    assert.include(CommandId.commandIdProblem("a b", "client")!, "may only contain")
    assert.include(CommandId.commandIdProblem(42, "client")!, "string")
    assert.isTrue(CommandId.isReservedType("effect.succeed"))
    assert.isFalse(CommandId.isReservedType("account.open"))
  })
})

describe("receipt matching", () => {
  const stored: Receipts.CommandIdentity = {
    commandId: "c",
    aggregateType: "account",
    aggregateId: "a",
    commandType: "account.open",
    fingerprint: "f"
  }
  it("the same identity matches; any difference is a conflict that says what differs", () => {
    assert.isUndefined(Receipts.conflictWith(stored, { ...stored }))
    assert.include(Receipts.conflictWith(stored, { ...stored, fingerprint: "g" })!, "another payload")
    assert.include(Receipts.conflictWith(stored, { ...stored, aggregateId: "b" })!, "'b'")
    assert.include(Receipts.conflictWith(stored, { ...stored, aggregateType: "thread" })!, "thread")
    assert.include(Receipts.conflictWith(stored, { ...stored, commandType: "account.close" })!, "account.close")
  })
})

describe("storage error classification", () => {
  it("reads SQLite and PostgreSQL codes", () => {
    const cases: ReadonlyArray<readonly [string, string]> = [
      ["SQLITE_FULL", "disk-full"],
      ["53100", "disk-full"],
      ["SQLITE_IOERR_FSYNC", "io-error"],
      ["SQLITE_BUSY", "busy"],
      ["SQLITE_CONSTRAINT_PRIMARYKEY", "constraint"],
      ["23505", "constraint"],
      ["SQLITE_CORRUPT", "corrupt"],
      ["SQLITE_READONLY", "read-only"],
      ["40001", "serialization"],
      ["08006", "connection"],
      ["SOMETHING_ELSE", "unknown"]
    ]
    for (const [code, reason] of cases) assert.strictEqual(StorageErrors.reasonForCode(code), reason, code)
  })
})

describe("failure reasons", () => {
  it("a failure stored before reasons existed decodes into the closed reason by its code", () => {
    const cases: ReadonlyArray<readonly [unknown, EffectOutcomes.FailureReason | undefined]> = [
      [{ message: "server process ended before the effect completed", code: "process-ended" }, "process-lost"],
      [{ message: "owner stopped before the effect completed", code: "owner-lost" }, "process-lost"],
      [{ message: "timed out after 5s; may or may not have taken effect", code: "timeout" }, "timeout"],
      [{ message: "handler defect: boom", code: "defect" }, "defect"],
      [{ message: "outcome could not be recorded: x", code: "outcome-not-recorded" }, "defect"],
      [{ message: "repaired by hand", code: "failed-by-operator" }, "operator"],
      [{ message: "storage: SQLITE_FULL", code: "SQLITE_FULL" }, "storage"],
      [{ message: "disk full", code: "53100" }, "storage"],
      [{ message: "no space", code: "ENOSPC" }, "storage"],
      [{ message: "storage: ENGINE_DEFECT", code: "ENGINE_DEFECT" }, "storage"],
      [{ message: "mailbox does not exist", code: "bounced" }, "handler"],
      [{ message: "flaky" }, "handler"],
      [null, undefined],
      ["not a failure", undefined]
    ]
    for (const [stored, reason] of cases)
      assert.strictEqual(EffectOutcomes.storedFailureReason(stored), reason, JSON.stringify(stored))
  })

  it("a stored reason wins over its code", () => {
    assert.strictEqual(
      EffectOutcomes.storedFailureReason({ message: "x", code: "SQLITE_FULL", reason: "handler" }),
      "handler"
    )
  })
})

describe("fault points", () => {
  it("fire only where configured: by point, kind, nth hit, or seeded probability", () => {
    const fired: Array<string> = []
    const points = FaultPoints.fromSpec("reactor.after-perform:kind=tool.execute:nth=2,reconcile.mid", (p) =>
      fired.push(p)
    )
    assert.isTrue(points.enabled)
    const hit = (point: FaultPoints.FaultPointName, kind?: string) =>
      Effect.runSync(points.hit(point, kind === undefined ? {} : { kind }))
    hit("reactor.after-perform", "tool.publish")
    hit("reactor.after-perform", "tool.execute")
    assert.deepStrictEqual(fired, [])
    hit("reactor.after-perform", "tool.execute")
    assert.deepStrictEqual(fired, ["reactor.after-perform"])
    hit("reactor.after-perform", "tool.execute")
    hit("reconcile.mid")
    assert.deepStrictEqual(fired, ["reactor.after-perform", "reconcile.mid"])
  })

  it("are a no-op when unset, and a seed replays the same schedule", () => {
    assert.isFalse(FaultPoints.fromSpec(undefined, () => assert.fail("fired")).enabled)
    const schedule = () => {
      const fired: Array<number> = []
      const points = FaultPoints.fromSpec("dispatch.after-commit:p=0.3:seed=42", () => fired.push(i))
      let i = 0
      for (; i < 50; i++) Effect.runSync(points.hit("dispatch.after-commit"))
      return fired
    }
    const first = schedule()
    assert.isAbove(first.length, 5)
    assert.isBelow(first.length, 30)
    assert.deepStrictEqual(schedule(), first)
    assert.throws(() => FaultPoints.parse("dispatch.sometime"), /unknown point/)
    assert.throws(() => FaultPoints.parse("reconcile.mid:delya=5"), /unknown filter 'delya'/)
  })

  it.effect("with delay= hold the fiber at the point for that long instead of killing", () =>
    Effect.gen(function* () {
      const points = FaultPoints.fromSpec("reconcile.mid:nth=1:delay=1000", () => assert.fail("killed"))
      const held = yield* Effect.fork(points.hit("reconcile.mid"))
      yield* TestClock.adjust("999 millis")
      assert.isNull(held.unsafePoll())
      yield* TestClock.adjust("1 millis")
      assert.isTrue(Exit.isSuccess(yield* Fiber.await(held)))
      // Only the configured hit is held.
      yield* points.hit("reconcile.mid")
    })
  )
})

describe("reactor verdicts", () => {
  const row = { attempts: 1 } as Outbox.OutboxRow
  const retry = Reactor.defaultRetry
  it("backoff doubles from the base up to the cap", () => {
    assert.deepStrictEqual(
      [1, 2, 3, 6, 10].map((a) => Reactor.backoffMillis(retry, a)),
      [1_000, 2_000, 4_000, 30_000, 30_000]
    )
    assert.strictEqual(Reactor.backoffMillis({ ...retry, backoff: "fixed" }, 4), 1_000)
  })
  it("a non-retryable failure is final at once; a retryable one is retried while attempts remain", () => {
    const policy = { onProcessLoss: "replay-safe", timeout: "1 second" } as const
    const final = Reactor.verdictFor(
      Exit.fail(new EffectFailure({ message: "bad input", retryable: false })),
      row,
      policy,
      retry,
      0
    )
    assert.deepStrictEqual(final, { type: "effect.fail", error: { message: "bad input", reason: "handler" } })
    const again = Reactor.verdictFor(
      Exit.fail(new EffectFailure({ message: "busy", retryable: true })),
      row,
      policy,
      retry,
      0
    )
    assert.deepStrictEqual(again, {
      type: "effect.fail",
      error: { message: "busy", reason: "handler" },
      retryAt: 1_000
    })
    const defect = Reactor.verdictFor(Exit.die(new Error("boom")), row, policy, retry, 0)
    assert.isTrue(
      defect.type === "effect.fail" &&
        defect.error.message.startsWith("handler defect:") &&
        defect.error.message.includes("boom")
    )
  })
  it("a row whose payload could not be read fails for good, whatever its (skipped) handler's exit", () => {
    // given a row read with an undecodable payload, of a replay-safe kind with attempts left
    const damaged = {
      attempts: 1,
      payload: null,
      undecodable: "its stored payload is not JSON (x)"
    } as Outbox.OutboxRow
    const policy = { onProcessLoss: "replay-safe", timeout: "1 second" } as const
    // when its performance ends, as a success (the handler was skipped) or a retryable failure
    const verdicts = [Exit.succeed(undefined), Exit.fail(new EffectFailure({ message: "busy", retryable: true }))].map(
      (exit) => Reactor.verdictFor(exit, damaged, policy, retry, 0)
    )
    // then the verdict is the same final failure, with its closed code and no retry
    for (const verdict of verdicts)
      assert.deepStrictEqual(verdict, {
        type: "effect.fail",
        error: {
          message: "not performed: its stored payload is not JSON (x)",
          code: "payload-undecodable",
          reason: "defect"
        }
      })
  })
  it.effect("a payload of another shape fails its handler's read as one that is not JSON fails the row", () =>
    Effect.gen(function* () {
      // given a kind's payload schema and a row whose stored payload is JSON of another shape
      const payloadOf = Reactor.payloadOf(Schema.Struct({ threadId: Schema.String }))
      const damaged = { kind: "model.step", attempts: 1, payload: { threadId: 7, text: "x".repeat(10_000) } }
      // when its handler reads the payload, and the performance ends with that failure
      const exit = yield* Effect.exit(payloadOf(damaged as Outbox.OutboxRow))
      const policy = { onProcessLoss: "replay-safe", timeout: "1 second" } as const
      // then it fails for good, unperformed, with the closed code and a reason that names the kind, not the value
      assert.deepStrictEqual(Reactor.verdictFor(exit, row, policy, retry, 0), {
        type: "effect.fail",
        error: {
          message:
            "not performed: its stored model.step payload does not have the expected shape (threadId: expected string)",
          code: "payload-undecodable",
          reason: "defect"
        }
      })
      assert.deepStrictEqual(yield* payloadOf({ ...damaged, payload: { threadId: "t1" } } as Outbox.OutboxRow), {
        threadId: "t1"
      })
    })
  )
})

describe("timer fire verdicts", () => {
  const identity = { commandId: "timer:reminder:o-1:t1#1", aggregateType: "reminder", aggregateId: "o-1" }
  it("a refusal of the command is final, a defect of domain code is a counted try, the rest is retried", () => {
    const verdict = (error: unknown) => TimerLoop.verdictOf(Exit.fail(error))
    assert.deepStrictEqual(TimerLoop.verdictOf(Exit.succeed({})), { _tag: "fired" })
    assert.deepStrictEqual(
      verdict(new CommandRejected({ ...identity, reason: "late", message: "late", duplicate: false })),
      { _tag: "fired" }
    )
    assert.deepStrictEqual(verdict(new InvalidCommand({ message: "unknown type", issues: [] })), {
      _tag: "failed",
      reason: "invalid-command",
      message: "unknown type"
    })
    assert.deepStrictEqual(verdict(new CommandIdConflict({ commandId: identity.commandId, message: "taken" })), {
      _tag: "failed",
      reason: "command-id-conflict",
      message: "taken"
    })
    assert.deepStrictEqual(verdict(new CommandDefect({ ...identity, stage: "decide", message: "decide threw" })), {
      _tag: "defect",
      message: "decide threw"
    })
    // Nothing is taken now: the round stops. Only this row's aggregate: the round goes on.
    for (const error of [
      new StorageFailure({ reason: "busy", code: "SQLITE_BUSY", message: "locked", operation: "commit" }),
      new EngineUnavailable({ reason: "shutting-down", message: "stopping" })
    ]) {
      assert.deepStrictEqual(verdict(error), { _tag: "retry", scope: "engine" })
    }
    assert.deepStrictEqual(TimerLoop.verdictOf(Exit.die(new Error("driver bug"))), { _tag: "retry", scope: "engine" })
    assert.deepStrictEqual(verdict(new AggregateUnavailable({ ...identity, message: "cannot replay" })), {
      _tag: "retry",
      scope: "row"
    })
  })
  it("the tell carries a failure's message cut to a bound, with a mark that it was cut", () => {
    const row = {
      ...identity,
      timerId: "t1",
      generation: 1,
      dueAt: 5_000,
      command: { type: "reminder.boom" },
      status: "pending",
      attempts: 5,
      updatedAt: 5_000
    } as const
    const long = "x".repeat(TimerFailures.MESSAGE_MAX * 3)
    const told = TimerFailures.commandOf(row, { reason: "defect", message: long })
    assert.strictEqual(told.message.length, TimerFailures.MESSAGE_MAX)
    assert.isTrue(told.message.endsWith("…"))
    assert.strictEqual(TimerFailures.commandOf(row, { reason: "defect", message: "short" }).message, "short")
    assert.deepStrictEqual(Schema.decodeUnknownSync(TimerFailures.TimerFailed)(told), told)
  })
})

describe("a kind's policy after process loss may be decided per row, from its payload", () => {
  const byPayload = (payload: unknown) =>
    (payload as { safe?: boolean } | null)?.safe === true ? ("replay-safe" as const) : ("process-bound" as const)
  it("a fixed policy is itself, a function reads the row's payload, an undeclared kind is process-bound", () => {
    assert.deepStrictEqual(
      [
        Reactor.processLossOf("replay-safe", { safe: false }),
        Reactor.processLossOf(byPayload, { safe: true }),
        Reactor.processLossOf(byPayload, {}),
        Reactor.processLossOf(undefined, { safe: true })
      ],
      ["replay-safe", "replay-safe", "process-bound", "process-bound"]
    )
  })
  it("a function that throws (say, on an undecodable row's null payload) or answers nonsense is process-bound: never repeated", () => {
    // given a user's policy that reads a field without a null check, and one that answers off the list
    const readsField = (payload: unknown) =>
      (payload as { mode: { safe: boolean } }).mode.safe ? ("replay-safe" as const) : ("process-bound" as const)
    const offList = () => "maybe" as unknown as "replay-safe"
    // when asked about a row whose payload could not be read, and about any row
    // then the answer is the safe one, and the question never throws into reclaim or reconcile
    assert.deepStrictEqual(
      [
        Reactor.processLossOf(readsField, null),
        Reactor.processLossOf(readsField, { mode: { safe: true } }),
        Reactor.processLossOf(offList, {})
      ],
      ["process-bound", "replay-safe", "process-bound"]
    )
  })
})

describe("settlement against the row as it is now", () => {
  const row: EffectOutcomes.SettlementTarget = {
    effectId: "job:j1",
    kind: "work.safe",
    aggregateType: "job",
    aggregateId: "j1",
    status: "running",
    attempts: 2,
    payload: {},
    error: null,
    leaseOwner: "owner-A",
    leaseExpiresAt: null,
    operatorActions: 0
  }
  const succeed = (attempt: number): EffectOutcomes.SettlementCommand => ({
    type: "effect.succeed",
    commandId: EffectOutcomes.outcomeId("job:j1", attempt),
    effectId: "job:j1",
    attempt,
    aggregateType: "job",
    aggregateId: "j1",
    by: "reactor",
    response: "done"
  })
  it("given a row claimed again at attempt 2, when attempt 1's outcome arrives, then it is stale", () => {
    const decision = EffectOutcomes.decideSettlement(row, succeed(1), 0)
    assert.deepStrictEqual(decision, {
      _tag: "Stale",
      message: "effect 'job:j1' is running at attempt 2; this settles attempt 1"
    })
  })
  it("given the same row, when attempt 2's outcome arrives, then it applies", () => {
    assert.strictEqual(EffectOutcomes.decideSettlement(row, succeed(2), 0)._tag, "Apply")
  })
})

describe("judging an owner dead", () => {
  it("only a process that watched the store take its writes for the whole dead-after span judges, with that span as cutoff", () => {
    // Writable since 5 s: at 12 s it has watched 7 s of a 10 s span, so it does not judge.
    assert.strictEqual(Worker.deadBefore(10_000, 5_000, 12_000), undefined)
    assert.strictEqual(Worker.deadBefore(10_000, 5_000, 15_000), 5_000)
    assert.strictEqual(Worker.deadBefore(10_000, 5_000, 40_000), 30_000)
    // Its own last write failed: it knows nothing about anyone's heartbeat.
    assert.strictEqual(Worker.deadBefore(10_000, undefined, 40_000), undefined)
  })
})

describe("a stored JSON column read against its schema", () => {
  const Item = Schema.Struct({
    kind: Schema.Literal("a", "b"),
    tags: Schema.optional(Schema.Array(Schema.Struct({ name: Schema.String })))
  })
  const readItem = StoredJson.reader(Item, "item")

  it("a value of the shape is decoded; one of another shape says where and what was expected, never the value", () => {
    assert.deepStrictEqual(readItem('{"kind":"a","tags":[{"name":"x"}]}'), {
      ok: true,
      value: { kind: "a", tags: [{ name: "x" }] }
    })
    const why = (text: string) => {
      const read = readItem(text)
      return read.ok ? "read" : read.why
    }
    assert.match(why('{"kind":'), /^its stored item is not JSON \(/)
    const shape = "its stored item does not have the expected shape"
    assert.strictEqual(why("42"), `${shape} (expected an object)`)
    assert.strictEqual(why("[]"), `${shape} (expected an object)`)
    assert.strictEqual(why('{"foo":1}'), `${shape} (kind is missing)`)
    assert.strictEqual(why(JSON.stringify({ kind: "c".repeat(10_000) })), `${shape} (kind: expected "a" | "b")`)
    assert.strictEqual(why('{"kind":"a","tags":[{}]}'), `${shape} (tags.0.name is missing)`)
    assert.strictEqual(why('{"kind":"a","tags":{}}'), `${shape} (tags: expected a list | undefined)`)
  })

  it("a reason is bounded however large the schema's description", () => {
    const Wide = Schema.Struct({ value: Schema.Literal(...Array.from({ length: 200 }, (_, i) => `literal-${i}`)) })
    const read = StoredJson.reader(Wide, "wide")('{"value":"none"}')
    assert.isFalse(read.ok)
    assert.isAtMost(read.ok ? 0 : read.why.length, 300)
  })
})
