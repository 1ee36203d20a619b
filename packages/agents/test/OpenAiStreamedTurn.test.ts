import { assert, describe, it } from "@effect/vitest"
import { Engine, Outbox } from "@orchestration/engine"
import { Effect } from "effect"
import { attemptState, stepOfEffect } from "../src/StepStreams.js"
import { transcriptView } from "../src/ThreadReadModel.js"
import * as FakeResponsesServer from "./fixtures/FakeResponsesServer.js"
import { agentsStack, allTurnsTerminal, interrupt, send, turnStatus, waitFor } from "./fixtures/agents.js"

const recordedText = (effectId: string) =>
  Effect.flatMap(Engine.Engine, (engine) => engine.readStreamChunks(effectId)).pipe(
    Effect.map((chunks) => chunks.map((c) => c.text).join(""))
  )

describe("a streamed turn through the OpenAI adapter (fake Responses server, SSE)", () => {
  it.scopedLive(
    "the deltas are recorded while the step runs, before its outcome, and concatenate to the transcript's text",
    () =>
      Effect.gen(function* () {
        const server = yield* FakeResponsesServer.make([
          { type: "text", text: "The answer is 42", chunks: ["The ", "answer ", "is ", "42"], delayMs: 300 }
        ])
        yield* Effect.gen(function* () {
          const engine = yield* Engine.Engine
          const effectId = "step:o1:m1#1"
          yield* engine.dispatchWithReceipt(send("o1", "m1", "what is the answer?"))
          yield* waitFor(
            Effect.map(recordedText(effectId), (text) => text.length > 0),
            "the first delta recorded"
          )
          // Recorded before the outcome: the row still runs and the transcript has no answer yet.
          assert.strictEqual((yield* Outbox.find(effectId))?.status, "running")
          assert.isFalse((yield* transcriptView("o1"))!.messages.some((m) => m.role === "assistant"))
          assert.isTrue("The answer is 42".startsWith(yield* recordedText(effectId)))
          yield* waitFor(allTurnsTerminal("o1", 1), "turn done")
          const transcript = (yield* transcriptView("o1"))!
          assert.isTrue(transcript.valid)
          assert.deepStrictEqual(transcript.messages.at(-1), { role: "assistant", content: "The answer is 42" })
          assert.strictEqual(yield* recordedText(effectId), "The answer is 42")
          assert.strictEqual(server.requests()[0]?.body.stream, true)
        }).pipe(Effect.provide(agentsStack({ provider: FakeResponsesServer.providerOf(server) })))
      })
  )

  it.scopedLive(
    "turn.interrupt mid-stream aborts the provider request within a second; the partial text stays, marked interrupted, outside the transcript",
    () =>
      Effect.gen(function* () {
        const server = yield* FakeResponsesServer.make([
          { type: "text", text: "partial answer", chunks: ["partial ", "answer"], delayMs: 50, hangAfterChunks: true }
        ])
        yield* Effect.gen(function* () {
          const engine = yield* Engine.Engine
          const effectId = "step:o2:m1#1"
          yield* engine.dispatchWithReceipt(send("o2", "m1", "say something long"))
          yield* waitFor(
            Effect.map(recordedText(effectId), (text) => text === "partial answer"),
            "the partial text recorded"
          )
          assert.strictEqual(server.aborted(), 0)
          const before = Date.now()
          yield* engine.dispatchWithReceipt(interrupt("o2", "o2:m1"))
          yield* waitFor(
            Effect.sync(() => server.aborted() === 1),
            "the provider request aborted",
            5_000
          )
          const elapsed = Date.now() - before
          assert.isBelow(elapsed, 1_000, `aborted after ${elapsed} ms`)
          yield* waitFor(
            Effect.map(turnStatus("o2"), (turns) => turns[0]?.status === "interrupted"),
            "turn interrupted"
          )
          yield* waitFor(
            Effect.map(Outbox.find(effectId), (row) => row?.status === "cancelled"),
            "step cancelled"
          )
          assert.strictEqual(yield* recordedText(effectId), "partial answer")
          const step = (yield* stepOfEffect(effectId))!
          assert.strictEqual(attemptState(step, 1), "interrupted")
          const transcript = (yield* transcriptView("o2"))!
          assert.isTrue(transcript.valid)
          assert.isFalse(JSON.stringify(transcript.messages).includes("partial answer"))
        }).pipe(Effect.provide(agentsStack({ provider: FakeResponsesServer.providerOf(server) })))
      })
  )
})
