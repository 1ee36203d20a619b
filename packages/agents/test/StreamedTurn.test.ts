import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Engine, Outbox } from "@orchestration/engine"
import { Effect } from "effect"
import { attemptState, stepOfEffect, stepsOfThread } from "../src/StepStreams.js"
import { transcriptView } from "../src/ThreadReadModel.js"
import { advanceUntil, agentsStack, allTurnsTerminal, script, send } from "./fixtures/agents.js"

const chunksOf = (effectId: string) => Effect.flatMap(Engine.Engine, (engine) => engine.readStreamChunks(effectId))

describe("a streamed model step", () => {
  it.effect(
    "its deltas are recorded for its attempt before its outcome; they concatenate to the transcript's text",
    () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(
          send("s1", "m1", script({ chunks: ["Hel", "lo, ", "streamed ", "world"], chunkDelayMs: 1000 }))
        )
        const effectId = "step:s1:m1#1"
        yield* advanceUntil(
          Effect.map(chunksOf(effectId), (chunks) => chunks.length >= 1),
          "the first chunk"
        )
        // The first delta is committed while the step still runs: no outcome, no assistant message yet.
        const row = yield* Outbox.find(effectId)
        assert.strictEqual(row?.status, "running")
        const early = yield* chunksOf(effectId)
        assert.strictEqual(early[0]?.text.startsWith("Hel"), true)
        assert.isFalse((yield* transcriptView("s1"))!.messages.some((m) => m.role === "assistant"))
        const step = (yield* stepOfEffect(effectId))!
        assert.deepStrictEqual(
          [step.threadId, step.turnId, step.step, attemptState(step, 1)],
          ["s1", "s1:m1", 1, "streaming"]
        )

        yield* advanceUntil(allTurnsTerminal("s1", 1), "turn done")
        const chunks = yield* chunksOf(effectId)
        assert.isTrue(chunks.every((c) => c.attempt === 1))
        // Contiguous from 0, each range once.
        let end = 0
        for (const chunk of chunks) {
          assert.strictEqual(chunk.start, end)
          end = chunk.end
        }
        const transcript = (yield* transcriptView("s1"))!
        assert.isTrue(transcript.valid)
        const answer = transcript.messages.at(-1)!
        assert.strictEqual(answer.role, "assistant")
        assert.strictEqual(chunks.map((c) => c.text).join(""), "Hello, streamed world")
        assert.strictEqual(answer.role === "assistant" ? answer.content : null, "Hello, streamed world")
        const [settled] = yield* stepsOfThread("s1")
        assert.strictEqual(attemptState(settled!, 1), "completed")
        // The chunk commands are internal: they were recorded under their own receipts, not as thread events.
        const sql = yield* SqlClient
        const events = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM events WHERE aggregate_id = 's1'`
        assert.isBelow(Number(events[0]!.n), 8)
      }).pipe(Effect.provide(agentsStack()))
  )
})
