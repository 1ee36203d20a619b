import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Engine, Outbox } from "@orchestration/engine"
import { Effect, TestClock } from "effect"
import { transcriptView } from "../src/ThreadReadModel.js"
import { advanceUntil, agentsStack, allTurnsTerminal, eventually, script, send, turnStatus } from "./fixtures/agents.js"

const chunksOf = (effectId: string) => Effect.flatMap(Engine.Engine, (engine) => engine.readStreamChunks(effectId))

describe("a model step whose deltas the full disk refuses", () => {
  it.effect(
    "fails visibly with reason storage (never completes with a truncated text); its turn ends failed once space returns",
    () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const sql = yield* SqlClient
        const effectId = "step:d1:m1#1"
        const big = (c: string) => c.repeat(40_000)
        yield* engine.dispatchWithReceipt(
          send("d1", "m1", script({ chunks: ["a", big("b"), big("c")], chunkDelayMs: 20_000 }))
        )
        yield* advanceUntil(
          Effect.map(chunksOf(effectId), (chunks) => chunks.length >= 1),
          "the first delta"
        )
        const [pages] = yield* sql<{ page_count: number }>`PRAGMA page_count`
        yield* sql.unsafe(`PRAGMA max_page_count = ${Number(pages!.page_count)}`)
        // The flush of the big delta is refused and re-sent (≈ 30 s of backoff), then ingestion gives up.
        for (let i = 0; i < 60; i++) {
          yield* TestClock.adjust("1 second")
          yield* eventually(Effect.succeed(true), "tick", 50)
          assert.notStrictEqual((yield* turnStatus("d1"))[0]?.status, "completed")
        }
        yield* sql.unsafe("PRAGMA max_page_count = 1073741823")
        yield* advanceUntil(allTurnsTerminal("d1", 1), "turn ended")
        const [turn] = yield* turnStatus("d1")
        assert.strictEqual(turn?.status, "failed")
        assert.match(turn?.reason ?? "", /not recorded/)
        const row = (yield* Outbox.find(effectId))!
        assert.strictEqual(row.status, "failed")
        assert.strictEqual((row.error as { reason?: string }).reason, "storage")
        assert.strictEqual((row.error as { code?: string }).code, "SQLITE_FULL")
        // Only what committed before the disk filled is recorded; the transcript has no answer.
        assert.strictEqual((yield* chunksOf(effectId)).map((c) => c.text).join(""), "a")
        const transcript = (yield* transcriptView("d1"))!
        assert.isTrue(transcript.valid)
        assert.isFalse(transcript.messages.some((m) => m.role === "assistant"))
      }).pipe(Effect.provide(agentsStack()))
  )
})
