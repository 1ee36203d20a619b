/**
 * The command router alone, given/when/then: given the registered aggregates, when a value arrives
 * from an origin, then it is routed (identity, aggregate, settles) or refused with an
 * InvalidCommand that says why. No store, no engine, no Effect runtime.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import { Account } from "../examples/Accounts.js"
import { Aggregate, CanonicalJson, Decision, InvalidCommand } from "../src/index.js"
import type { Origin } from "../src/CommandId.js"
import * as CommandRouter from "../src/CommandRouter.js"
import * as EffectOutcomes from "../src/EffectOutcomes.js"
import type { QueuedCommand } from "../src/Processor.js"

const given = (...aggregates: ReadonlyArray<Aggregate.AnyAggregate>) => {
  const router = CommandRouter.make(aggregates)
  return {
    when: (input: unknown, origin: Origin = "client") => {
      const outcome = router.route(input, origin)
      return {
        thenRouted: (expected: {
          readonly aggregateType: string
          readonly aggregateId: string
          readonly settles: boolean
        }): QueuedCommand => {
          if (outcome instanceof InvalidCommand) assert.fail(`refused: ${outcome.message}`)
          const raw = input as Record<string, unknown>
          assert.deepStrictEqual(outcome.identity, {
            commandId: raw.commandId as string,
            aggregateType: expected.aggregateType,
            aggregateId: expected.aggregateId,
            commandType: raw.type as string,
            fingerprint: CanonicalJson.fingerprint(raw)
          })
          assert.strictEqual(outcome.aggregate.name, expected.aggregateType)
          assert.strictEqual(outcome.settles, expected.settles)
          return outcome
        },
        thenRefused: (expected: {
          readonly message: string
          readonly commandId?: string
          readonly issuePaths?: ReadonlyArray<ReadonlyArray<string>>
        }) => {
          if (!(outcome instanceof InvalidCommand)) return assert.fail("routed, expected a refusal")
          assert.strictEqual(outcome.message, expected.message)
          assert.strictEqual(outcome.commandId, expected.commandId)
          assert.deepStrictEqual(
            outcome.issues.map((issue) => issue.path),
            expected.issuePaths ?? []
          )
        }
      }
    }
  }
}

const settlement = {
  commandId: "outcome:email:a1#1",
  type: "effect.succeed",
  effectId: "email:a1",
  attempt: 1,
  aggregateType: "account",
  aggregateId: "a1",
  by: "reactor",
  response: { sent: true }
}

describe("command router", () => {
  it("routes a client command to its aggregate, identified by id, type and the payload as sent", () => {
    given(Account)
      .when({ commandId: "c1", type: "account.open", accountId: "a1", owner: "ann" })
      .thenRouted({ aggregateType: "account", aggregateId: "a1", settles: false })
  })

  it("fingerprints the payload as sent, before schema defaults apply, so adding a default never breaks a retry", () => {
    const routed = given(Account)
      .when({ commandId: "c1", type: "account.deposit", accountId: "a1", amount: 5 })
      .thenRouted({ aggregateType: "account", aggregateId: "a1", settles: false })
    assert.notStrictEqual(
      routed.identity.fingerprint,
      CanonicalJson.fingerprint({ commandId: "c1", type: "account.deposit", accountId: "a1", amount: 5, memo: "" })
    )
  })

  it("refuses a value that is not a JSON object, without a command id to answer under", () => {
    for (const input of [null, "account.open", 42, [{ commandId: "c1" }]]) {
      given(Account).when(input).thenRefused({ message: "a command is a JSON object with commandId and type" })
    }
  })

  it("refuses a client id under a reserved prefix, keeping the id; the engine may use it", () => {
    const command = { commandId: "reconcile:a1", type: "account.touch", accountId: "a1" }
    given(Account)
      .when(command, "client")
      .thenRefused({ message: "commandId prefix 'reconcile:' is reserved for the engine", commandId: "reconcile:a1" })
    given(Account).when(command, "internal").thenRouted({ aggregateType: "account", aggregateId: "a1", settles: false })
  })

  it("refuses a command whose id is not a string, or whose type is not a string", () => {
    given(Account)
      .when({ commandId: 7, type: "account.touch", accountId: "a1" })
      .thenRefused({ message: "commandId must be a string" })
    given(Account)
      .when({ commandId: "c1", type: 7, accountId: "a1" })
      .thenRefused({ message: "type must be a string", commandId: "c1" })
  })

  it("refuses the engine's internal types from a client, and routes them for the engine as settlements", () => {
    given(Account)
      .when({ ...settlement, commandId: "c1" }, "client")
      .thenRefused({ message: "command type 'effect.succeed' is internal to the engine", commandId: "c1" })
    given(Account)
      .when(settlement, "internal")
      .thenRouted({ aggregateType: "account", aggregateId: "a1", settles: true })
  })

  it("refuses a settlement for an aggregate that is not registered, or with a malformed payload", () => {
    given(Account)
      .when({ ...settlement, aggregateType: "thread" }, "internal")
      .thenRefused({ message: "no aggregate named 'thread'", commandId: settlement.commandId })
    given(Account)
      .when({ ...settlement, attempt: "one" }, "internal")
      .thenRefused({
        message: "invalid 'effect.succeed' command",
        commandId: settlement.commandId,
        issuePaths: [["attempt"]]
      })
  })

  it("routes a timer's failure to the timer's aggregate for the engine only; an unknown aggregate is refused", () => {
    const failed = {
      commandId: "timer:account:a1:t1#1:failed",
      type: "engine.timer-failed",
      aggregateType: "account",
      aggregateId: "a1",
      timerId: "t1",
      generation: 1,
      at: 5_000,
      command: null,
      reason: "unreadable",
      message: "command is not JSON"
    }
    given(Account)
      .when({ ...failed, commandId: "c1" }, "client")
      .thenRefused({ message: "command type 'engine.timer-failed' is internal to the engine", commandId: "c1" })
    given(Account).when(failed, "internal").thenRouted({ aggregateType: "account", aggregateId: "a1", settles: false })
    given(Account)
      .when({ ...failed, aggregateType: "thread" }, "internal")
      .thenRefused({ message: "no aggregate named 'thread'", commandId: failed.commandId })
  })

  it("routes a stream chunk without the schema: same answer, a fingerprint over its fields, refusals as the schema says", () => {
    const router = CommandRouter.make([Account])
    const chunk = {
      type: "effect.stream",
      commandId: "ingest:stream:email:a1#1:0-5",
      effectId: "email:a1",
      aggregateType: "account",
      aggregateId: "a1",
      attempt: 1,
      start: 0,
      text: "hello"
    }
    const routed = router.route(chunk, "internal")
    if (routed instanceof InvalidCommand) return assert.fail(routed.message)
    assert.deepStrictEqual(
      { ...routed.identity, fingerprint: "" },
      {
        commandId: chunk.commandId,
        aggregateType: "account",
        aggregateId: "a1",
        commandType: "effect.stream",
        fingerprint: ""
      }
    )
    assert.deepStrictEqual([routed.settles, routed.throughPage, routed.effectId], [false, true, "email:a1"])
    const printOf = (input: unknown) => {
      const again = router.route(input, "internal")
      return again instanceof InvalidCommand ? assert.fail(again.message) : again.identity.fingerprint
    }
    // A re-sent flush is the same command; another text, channel or offset under its id is not.
    assert.strictEqual(printOf({ ...chunk }), routed.identity.fingerprint)
    for (const other of [{ text: "hellp" }, { channel: "tool:c1" }, { channelStart: 3 }, { attempt: 2 }]) {
      assert.notStrictEqual(printOf({ ...chunk, ...other }), routed.identity.fingerprint, JSON.stringify(other))
    }
    // Whatever the quick check refuses, the schema names, as for any other command.
    given(Account)
      .when({ ...chunk, text: "" }, "internal")
      .thenRefused({ message: "invalid 'effect.stream' command", commandId: chunk.commandId, issuePaths: [["text"]] })
    given(Account)
      .when({ ...chunk, extra: 1 }, "internal")
      .thenRefused({ message: "invalid 'effect.stream' command", commandId: chunk.commandId, issuePaths: [["extra"]] })
    given(Account)
      .when({ ...chunk, aggregateType: "thread" }, "internal")
      .thenRefused({ message: "no aggregate named 'thread'", commandId: chunk.commandId })
  })

  it("checks the engine's requeues and successes without the schema, accepting exactly what the schema accepts", () => {
    const requeue = {
      commandId: "reconcile:email:a1#1",
      type: "effect.requeue",
      effectId: "email:a1",
      attempt: 1,
      aggregateType: "account",
      aggregateId: "a1",
      by: "reconcile",
      reason: "requeued after the previous server process ended"
    }
    const variants: ReadonlyArray<Record<string, unknown>> = [
      requeue,
      settlement,
      { ...settlement, response: null },
      { ...settlement, response: undefined },
      { ...requeue, extra: 1 },
      { ...requeue, by: "someone" },
      { ...requeue, attempt: "1" },
      { ...requeue, reason: 7 },
      { ...settlement, reason: "not a succeed field" },
      { ...requeue, effectId: undefined },
      Object.fromEntries(Object.entries(settlement).filter(([key]) => key !== "response")),
      Object.fromEntries(Object.entries(requeue).filter(([key]) => key !== "by"))
    ]
    for (const raw of variants) {
      const decoded: Either.Either<unknown, unknown> =
        raw.type === "effect.requeue"
          ? Schema.decodeUnknownEither(EffectOutcomes.EffectRequeue, { onExcessProperty: "error" })(raw)
          : Schema.decodeUnknownEither(EffectOutcomes.EffectSucceed, { onExcessProperty: "error" })(raw)
      const quick = EffectOutcomes.decodeSettlementQuickly(raw)
      // Refused by the quick check is fine (the schema then decides); accepted must mean accepted, as is.
      if (quick !== undefined) {
        assert.isTrue(Either.isRight(decoded), `quick check accepted what the schema refuses: ${JSON.stringify(raw)}`)
        if (Either.isRight(decoded)) assert.deepStrictEqual(quick, decoded.right)
      }
    }
    // The common shapes take the quick way; the router's answer is the schema path's.
    assert.isDefined(EffectOutcomes.decodeSettlementQuickly(requeue))
    assert.isDefined(EffectOutcomes.decodeSettlementQuickly(settlement))
    given(Account).when(requeue, "internal").thenRouted({ aggregateType: "account", aggregateId: "a1", settles: true })
    given(Account)
      .when({ ...requeue, reason: 7 }, "internal")
      .thenRefused({
        message: "invalid 'effect.requeue' command",
        commandId: requeue.commandId,
        issuePaths: [["reason"]]
      })
  })

  it("refuses a type no aggregate declares", () => {
    given(Account)
      .when({ commandId: "c1", type: "account.rename", accountId: "a1" })
      .thenRefused({ message: "unknown command type 'account.rename'", commandId: "c1" })
  })

  it("refuses a payload that does not decode, naming the field: a wrong type or an excess property", () => {
    given(Account)
      .when({ commandId: "c1", type: "account.deposit", accountId: "a1", amount: "5" })
      .thenRefused({ message: "invalid 'account.deposit' command", commandId: "c1", issuePaths: [["amount"]] })
    given(Account)
      .when({ commandId: "c1", type: "account.deposit", accountId: "a1", amount: 5, note: "x" })
      .thenRefused({ message: "invalid 'account.deposit' command", commandId: "c1", issuePaths: [["note"]] })
  })

  it("refuses a client's command nested deeper than 64 levels before reading it, instead of overflowing the stack", () => {
    const nested = (depth: number): unknown => {
      let value: unknown = "x"
      for (let i = 0; i < depth; i++) value = [value]
      return value
    }
    // 3,000 levels in a field that fails its schema: wording the refusal recursed into the value.
    given(Account)
      .when({ commandId: "deep", type: "account.open", accountId: "a1", owner: nested(3_000) })
      .thenRefused({ message: "the command nests deeper than 64 levels" })
    // 63 levels in a field (64 with the command) is read as usual: here, refused by its schema.
    given(Account)
      .when({ commandId: "deep", type: "account.open", accountId: "a1", owner: nested(63) })
      .thenRefused({ message: "invalid 'account.open' command", commandId: "deep", issuePaths: [["owner"]] })
  })

  it("refuses a command whose aggregate id cannot be told, instead of throwing", () => {
    const Picky = Aggregate.make({
      name: "picky",
      commands: { "picky.poke": Aggregate.command("picky.poke", { pickyId: Schema.String }) },
      events: Aggregate.event("picky.poked", {}),
      aggregateId: (command) => {
        if (command.pickyId === "") throw new Error("an empty id")
        return command.pickyId
      },
      initialState: {},
      evolve: (state) => state,
      decide: () => Decision.none()
    })
    given(Picky)
      .when({ commandId: "c1", type: "picky.poke", pickyId: "" })
      .thenRefused({ message: "cannot tell the aggregate of this command: Error: an empty id", commandId: "c1" })
  })

  it("cannot be built when two aggregates declare one command type", () => {
    assert.throws(
      () => given(Account, { ...Account, name: "copy" }),
      "command type 'account.open' is declared by two aggregates"
    )
  })

  it("finds a registered aggregate by name, and no other", () => {
    const router = CommandRouter.make([Account])
    assert.strictEqual(router.aggregate("account"), Account)
    assert.isUndefined(router.aggregate("thread"))
  })
})
