import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Engine, Outbox } from "@orchestration/engine"
import { Effect, TestClock } from "effect"
import { threadView, transcriptView } from "../src/ThreadReadModel.js"
import { advanceUntil, agentsStack, allTurnsTerminal, eventually, script, send } from "./fixtures/agents.js"

describe("the 2026-09-10 scenario: recording a tool result fails with SQLITE_FULL", () => {
  it.effect("the failure to record becomes the call's one result, the turn fails visibly, the thread then serves a new turn", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const sql = yield* SqlClient
      // The tool's output is large (90 kB of stdout): recording it needs pages the full disk will not give.
      const command = "x".repeat(90_000)
      yield* engine.dispatchWithReceipt(send("t1", "m1", script({ toolCalls: [{ name: "execute", arguments: { command, sleepMs: 1_000 } }] }, { text: "never" })))
      yield* eventually(Effect.map(Outbox.find("tool:t1:m1:call_1_0"), (r) => r?.status === "running"), "execute running")
      const [pages] = yield* sql<{ page_count: number }>`PRAGMA page_count`
      yield* sql.unsafe(`PRAGMA max_page_count = ${Number(pages!.page_count)}`)
      // The disk stays full for a while: the turn never reads as completed, the call never as succeeded.
      for (let i = 0; i < 5; i++) {
        yield* TestClock.adjust("1 second")
        yield* eventually(Effect.succeed(true), "tick", 50)
        const view = (yield* threadView("t1"))!
        assert.notStrictEqual(view.turns[0]!.status, "completed")
        assert.notStrictEqual((yield* Outbox.find("tool:t1:m1:call_1_0"))!.status, "succeeded")
      }
      yield* sql.unsafe("PRAGMA max_page_count = 1073741823")
      yield* advanceUntil(allTurnsTerminal("t1", 1), "turn ended")
      const view = (yield* threadView("t1"))!
      assert.deepStrictEqual(view.turns.map((t) => [t.status, t.reason]), [["failed", "storage: SQLITE_FULL"]])
      assert.deepStrictEqual(view.turns[0]!.toolCalls.map((c) => [c.status, c.result]), [["failed", "error: storage: SQLITE_FULL"]])
      const transcript = (yield* transcriptView("t1"))!
      assert.isTrue(transcript.valid, JSON.stringify(transcript.problems))
      const results = transcript.messages.filter((m) => m.role === "tool")
      assert.deepStrictEqual(results.map((m) => m.content), ["error: storage: SQLITE_FULL"])
      // Space is back: the next message's turn completes without a restart.
      yield* engine.dispatchWithReceipt(send("t1", "m2", "are you there?"))
      yield* advanceUntil(allTurnsTerminal("t1", 2), "second turn")
      assert.deepStrictEqual((yield* threadView("t1"))!.turns.map((t) => t.status), ["failed", "completed"])
      assert.isTrue((yield* transcriptView("t1"))!.valid)
    }).pipe(Effect.provide(agentsStack())))
})
