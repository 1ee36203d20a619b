/**
 * A step's tool-call argument deltas are recorded like its text deltas (same ingestion, channel
 * `tool:<callId>`), and each call's concatenated deltas are the arguments the step recorded for it
 * (its outcome, the transcript): through the scripted provider on the TestClock, and through the
 * OpenAI adapter against the fake Responses server's SSE.
 */
import { assert, describe, it } from "@effect/vitest"
import { Engine } from "@orchestration/engine"
import { Effect } from "effect"
import { channelText, toolCallOfChannel, toolChannel } from "../src/StepStreams.js"
import { transcriptView } from "../src/ThreadReadModel.js"
import * as FakeResponsesServer from "./fixtures/FakeResponsesServer.js"
import { advanceUntil, agentsStack, allTurnsTerminal, script, send, waitFor } from "./fixtures/agents.js"

const chunksOf = (effectId: string) =>
  Effect.flatMap(Engine.Engine, (engine) => engine.readStreamChunks(effectId, { limit: 10_000 }))

/** The calls the transcript holds for a thread: id → arguments (JSON text). */
const recordedCalls = (threadId: string) =>
  Effect.map(transcriptView(threadId), (view) =>
    Object.fromEntries(
      (view?.messages ?? []).flatMap((m) =>
        m.role === "assistant" ? (m.tool_calls ?? []).map((c) => [c.id, c.function.arguments] as const) : []
      )
    )
  )

describe("tool-call argument deltas", () => {
  it.effect(
    "scripted: each call's deltas (its channel) concatenate to its recorded arguments; the text channel is the text",
    () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const args = { path: "notes/😀.md", content: "hello 🎉 streamed" }
        yield* engine.dispatchWithReceipt(
          send(
            "tc1",
            "m1",
            script(
              {
                chunks: ["Publishing ", "now."],
                chunkDelayMs: 100,
                toolCalls: [
                  { name: "publish", arguments: args },
                  { name: "read", arguments: { path: "notes/😀.md" } }
                ]
              },
              { text: "done" }
            )
          )
        )
        yield* advanceUntil(allTurnsTerminal("tc1", 1), "turn done")
        const chunks = yield* chunksOf("step:tc1:m1#1")
        const calls = yield* recordedCalls("tc1")
        const ids = Object.keys(calls)
        assert.strictEqual(ids.length, 2)
        assert.strictEqual(channelText(chunks, 1), "Publishing now.")
        for (const id of ids) {
          const streamed = channelText(chunks, 1, toolChannel(id))
          assert.strictEqual(streamed, calls[id])
          assert.deepStrictEqual(JSON.parse(streamed), JSON.parse(calls[id]!))
        }
        // One order for the attempt across channels: contiguous from 0.
        let end = 0
        for (const c of chunks) {
          assert.strictEqual(c.start, end)
          end = c.end
        }
        assert.deepStrictEqual(
          [...new Set(chunks.map((c) => toolCallOfChannel(c.channel) ?? "text"))].sort(),
          [...ids, "text"].sort()
        )
      }).pipe(Effect.provide(agentsStack()))
  )

  it.scopedLive("OpenAI adapter: the function call's argument deltas from the SSE are its recorded arguments", () =>
    Effect.gen(function* () {
      const args = { path: "hello.md", content: "hi 👋 there" }
      const server = yield* FakeResponsesServer.make([
        { type: "function_call", callId: "call_pub_1", name: "publish", arguments: args },
        { type: "text", text: "published hello.md" }
      ])
      const provider = FakeResponsesServer.providerOf(server)
      yield* Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(send("tc2", "m1", "publish a greeting"))
        yield* waitFor(allTurnsTerminal("tc2", 1), "turn done")
        const chunks = yield* chunksOf("step:tc2:m1#1")
        const calls = yield* recordedCalls("tc2")
        assert.deepStrictEqual(Object.keys(calls), ["call_pub_1"])
        const streamed = channelText(chunks, 1, toolChannel("call_pub_1"))
        assert.strictEqual(streamed, JSON.stringify(args))
        assert.deepStrictEqual(JSON.parse(streamed), JSON.parse(calls.call_pub_1!))
        // The second step answered in text: its chunks are all main text.
        const second = yield* chunksOf("step:tc2:m1#2")
        assert.strictEqual(channelText(second, 1), "published hello.md")
        assert.isTrue(second.every((c) => c.channel === ""))
      }).pipe(Effect.provide(agentsStack({ provider })))
    })
  )
})
