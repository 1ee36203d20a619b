import { assert, describe, it } from "@effect/vitest"
import { Engine } from "@orchestration/engine"
import { Effect, Redacted } from "effect"
import * as OpenAiProvider from "../src/OpenAiProvider.js"
import { transcriptView, threadView } from "../src/ThreadReadModel.js"
import { World } from "../src/World.js"
import * as FakeResponsesServer from "./fixtures/FakeResponsesServer.js"
import { agentsStack, allTurnsTerminal, eventually, send } from "./fixtures/agents.js"

describe("a turn through the OpenAI-compatible adapter", () => {
  it.scopedLive("completes a tool-using turn against the local fake Responses server, which accepts every replay", () =>
    Effect.gen(function* () {
      const server = yield* FakeResponsesServer.make([
        {
          type: "function_call",
          callId: "call_pub_1",
          name: "publish",
          arguments: { path: "hello.md", content: "hi" }
        },
        { type: "text", text: "published hello.md" }
      ])
      const provider = OpenAiProvider.layer({
        apiUrl: server.apiUrl,
        apiKey: Redacted.make("sk-test"),
        model: "gpt-test"
      })
      yield* Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const world = yield* World
        yield* engine.dispatchWithReceipt(send("t1", "m1", "publish a greeting"))
        yield* eventually(allTurnsTerminal("t1", 1), "turn done")
        const view = (yield* threadView("t1"))!
        assert.deepStrictEqual(
          view.turns.map((t) => [t.status, t.steps]),
          [["completed", 2]]
        )
        assert.deepStrictEqual(
          view.turns[0]!.toolCalls.map((c) => [c.callId, c.name, c.status]),
          [["call_pub_1", "publish", "succeeded"]]
        )
        const transcript = (yield* transcriptView("t1"))!
        assert.isTrue(transcript.valid)
        assert.deepStrictEqual(transcript.messages.at(-1), { role: "assistant", content: "published hello.md" })
        assert.strictEqual((yield* world.readVersions("hello.md")).length, 1)
        // The second request replayed the call and its output; the fake would have answered 400 otherwise.
        const requests = server.requests()
        assert.strictEqual(requests.length, 2)
        const replay = requests[1]!.body.input ?? []
        assert.deepStrictEqual(
          replay
            .filter((i) => i.type === "function_call" || i.type === "function_call_output")
            .map((i) => [i.type, i.call_id]),
          [
            ["function_call", "call_pub_1"],
            ["function_call_output", "call_pub_1"]
          ]
        )
      }).pipe(Effect.provide(agentsStack({ provider })))
    })
  )
})
