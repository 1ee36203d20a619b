import { assert, describe, it } from "@effect/vitest"
import { EffectOutcomes, Engine, Outbox } from "@orchestration/engine"
import { Effect, Exit } from "effect"
import { World } from "../src/World.js"
import {
  advanceUntil,
  agentsStack,
  allTurnsTerminal,
  eventually,
  processesWith,
  script,
  send,
  turnStatus,
  waitFor
} from "./fixtures/agents.js"

const operator = (action: "retry" | "cancel", effectId: string) =>
  Effect.gen(function* () {
    const row = (yield* Outbox.find(effectId))!
    const engine = yield* Engine.Engine
    return yield* Effect.exit(
      engine.dispatchWithReceipt(EffectOutcomes.operatorCommand(action, row), { origin: "internal" })
    )
  })

describe("operator actions on tool calls", () => {
  it.effect(
    "a cancelled execute whose turn has closed is never retried: the retry is refused by the thread, the command ran once",
    () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const world = yield* World
        const execute = "tool:t1:m1:call_1_0"
        yield* engine.dispatchWithReceipt(
          send(
            "t1",
            "m1",
            script({ toolCalls: [{ name: "execute", arguments: { command: "sleep 601" } }] }, { text: "after" })
          )
        )
        yield* waitFor(
          Effect.map(Outbox.find(execute), (r) => r?.status === "running"),
          "execute running"
        )
        yield* waitFor(
          Effect.sync(() => processesWith("sleep", "601").length === 1),
          "the command running"
        )
        const cancelled = yield* operator("cancel", execute)
        assert.isTrue(Exit.isSuccess(cancelled))
        yield* eventually(allTurnsTerminal("t1", 1), "the turn went on with the cancelled result and closed")
        assert.deepStrictEqual(
          (yield* turnStatus("t1")).map((t) => t.status),
          ["completed"]
        )
        // Once the owner has stopped the handler, the only reason left to refuse is the domain's.
        yield* advanceUntil(
          Effect.map(Outbox.find(execute), (r) => r?.leaseOwner === null),
          "the owner stopped the cancelled execute"
        )
        // Stopping the handler stopped its process: nothing of the command is left running.
        assert.deepStrictEqual(processesWith("sleep", "601"), [])
        const retried = yield* operator("retry", execute)
        assert.isTrue(Exit.isFailure(retried), "a retry of a process-bound call whose turn has closed is refused")
        if (Exit.isFailure(retried)) {
          const error = retried.cause._tag === "Fail" ? retried.cause.error : undefined
          assert.strictEqual(error?._tag, "EffectActionRefused")
          assert.strictEqual((error as { reason?: string }).reason, "refused-by-owner")
          assert.include(error?.message, "has closed")
        }
        assert.strictEqual((yield* Outbox.find(execute))!.status, "cancelled")
        const ledger = (yield* world.readLedger).filter((entry) => entry.effectId === execute)
        assert.strictEqual(ledger.length, 1)
        assert.deepStrictEqual(
          (yield* world.readExecutions).map((e) => e.command),
          ["sleep 601"]
        )
      }).pipe(Effect.provide(agentsStack()))
  )

  it.effect("a failed MCP call (process-bound) whose turn has closed is not retried either", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      // No server 's' is configured: the call fails at once (unknown-server), and the turn goes on to close.
      const call = "tool:t1:m1:call_1_0"
      yield* engine.dispatchWithReceipt(
        send("t1", "m1", script({ toolCalls: [{ name: "s__t", arguments: {} }] }, { text: "after" }))
      )
      yield* advanceUntil(allTurnsTerminal("t1", 1), "turn done")
      const row = (yield* Outbox.find(call))!
      assert.deepStrictEqual(
        [row.kind, row.status, (row.error as { code?: string } | null)?.code],
        ["tool.mcp_call", "failed", "unknown-server"]
      )
      const retried = yield* operator("retry", call)
      assert.isTrue(Exit.isFailure(retried), "refused")
      if (Exit.isFailure(retried)) {
        const error = retried.cause._tag === "Fail" ? retried.cause.error : undefined
        assert.strictEqual((error as { reason?: string }).reason, "refused-by-owner")
      }
    }).pipe(Effect.provide(agentsStack()))
  )

  it.effect("a failed publish (replay-safe) can still be retried after its turn closed", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const publish = "tool:t1:m1:call_1_0"
      yield* engine.dispatchWithReceipt(
        send(
          "t1",
          "m1",
          script(
            { toolCalls: [{ name: "publish", arguments: { path: "../outside.md", content: "x" } }] },
            { text: "after" }
          )
        )
      )
      yield* eventually(allTurnsTerminal("t1", 1), "turn done")
      assert.strictEqual((yield* Outbox.find(publish))!.status, "failed")
      const retried = yield* operator("retry", publish)
      assert.isTrue(Exit.isSuccess(retried))
    }).pipe(Effect.provide(agentsStack()))
  )
})
