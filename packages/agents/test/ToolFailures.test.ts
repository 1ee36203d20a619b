import { assert, describe, it } from "@effect/vitest"
import { Engine, Outbox } from "@orchestration/engine"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { delegateRefusal } from "../src/AgentReactor.js"
import { threadView, transcriptView } from "../src/ThreadReadModel.js"
import { World } from "../src/World.js"
import { agentsStack, allTurnsTerminal, eventually, script, send, turnStatus } from "./fixtures/agents.js"

/** The result the model was given for one call of the thread's first turn. */
const resultOf = (threadId: string, effectId: string) =>
  Effect.map(threadView(threadId), (view) => view!.turns[0]!.toolCalls.find((c) => c.effectId === effectId))

describe("tool failures the model can act on", () => {
  it.effect("a publish that can never succeed fails at its first attempt, naming the path, and the turn goes on", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const world = yield* World
      // `a.jsonl/b` makes `versions/a.jsonl` a directory, so `a` has nowhere to keep its versions.
      yield* engine.dispatchWithReceipt(
        send(
          "t1",
          "m1",
          script(
            { toolCalls: [{ name: "publish", arguments: { path: "a.jsonl/b", content: "x" } }] },
            { toolCalls: [{ name: "publish", arguments: { path: "a", content: "y" } }] },
            { text: "I will use another path" }
          )
        )
      )
      // The clock never moves: a retry (which waits a backoff) would never let the turn end.
      yield* eventually(allTurnsTerminal("t1", 1), "turn done without waiting for retries")
      const row = (yield* Outbox.find("tool:t1:m1:call_2_0"))!
      assert.deepStrictEqual([row.status, row.attempts], ["failed", 1])
      const call = (yield* resultOf("t1", "tool:t1:m1:call_2_0"))!
      assert.strictEqual(call.status, "failed")
      assert.include(call.result, "cannot publish 'a'")
      assert.include(call.result, "versions/a.jsonl is a directory")
      assert.include(call.result, "retrying will not help")
      assert.notInclude(call.result, world.dir)
      assert.deepStrictEqual(
        (yield* turnStatus("t1")).map((t) => t.status),
        ["completed"]
      )
      assert.isTrue((yield* transcriptView("t1"))!.valid)
    }).pipe(Effect.provide(agentsStack()))
  )

  it.effect("a delegate the target thread refuses names the field and what it allows", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(
        send(
          "t1",
          "m1",
          script(
            { toolCalls: [{ name: "delegate", arguments: { threadId: "no spaces/here", text: "hi" } }] },
            { text: "ok" }
          )
        )
      )
      yield* eventually(allTurnsTerminal("t1", 1), "turn done")
      const row = (yield* Outbox.find("tool:t1:m1:call_1_0"))!
      assert.deepStrictEqual([row.status, row.attempts], ["failed", 1])
      const call = (yield* resultOf("t1", "tool:t1:m1:call_1_0"))!
      assert.include(call.result, "delegate refused")
      assert.include(call.result, "threadId")
      assert.include(call.result, "A-Z a-z 0-9")
      assert.notInclude(call.result, "messageId")
      assert.deepStrictEqual(
        (yield* turnStatus("t1")).map((t) => t.status),
        ["completed"]
      )
    }).pipe(Effect.provide(agentsStack()))
  )

  it.effect(
    "8 threads publishing the same content at once all succeed at their first attempt: one blob, one version",
    () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const world = yield* World
        const threads = Array.from({ length: 8 }, (_, i) => `t${i}`)
        const publish = script(
          { toolCalls: [{ name: "publish", arguments: { path: "shared.md", content: "same" } }] },
          { text: "done" }
        )
        yield* Effect.forEach(threads, (threadId) => engine.dispatchWithReceipt(send(threadId, "m1", publish)), {
          concurrency: "unbounded"
        })
        yield* Effect.forEach(threads, (threadId) => eventually(allTurnsTerminal(threadId, 1), `${threadId} done`))
        const rows = yield* Effect.forEach(threads, (threadId) => Outbox.find(`tool:${threadId}:m1:call_1_0`))
        assert.deepStrictEqual(
          rows.map((r) => [r!.status, r!.attempts]),
          threads.map(() => ["succeeded", 1])
        )
        const cid = createHash("sha256").update("same", "utf8").digest("hex")
        assert.deepStrictEqual(yield* world.readVersions("shared.md"), [{ cid }])
        assert.deepStrictEqual(yield* Effect.promise(() => fs.readdir(path.join(world.dir, "blobs"))), [cid])
      }).pipe(Effect.provide(agentsStack()))
  )

  it("a delegate refusal names the model's arguments, bounds what it echoes, and keeps the engine's message when it has no issues", () => {
    const long = `Expected at most 100000 characters, actual "${"x".repeat(5_000)}"`
    const text = delegateRefusal({
      message: "invalid 'message.send' command",
      issues: [
        { path: ["text"], message: long },
        { path: ["messageId"], message: "bad" }
      ]
    })
    assert.include(text, "delegate refused: argument 'text': Expected at most 100000 characters")
    assert.include(text, `(${long.length} characters)`)
    assert.isBelow(text.length, 400)
    assert.include(text, "; messageId: bad")
    assert.strictEqual(delegateRefusal({ message: "thread 'x' is deleted" }), "delegate refused: thread 'x' is deleted")
  })
})
