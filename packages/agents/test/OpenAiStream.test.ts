import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Redacted, Stream } from "effect"
import * as OpenAiProvider from "../src/OpenAiProvider.js"
import { ModelProvider, type ModelStepPart, streamOf } from "../src/Provider.js"
import { toolDefinitions } from "../src/Tools.js"
import * as FakeResponsesServer from "./fixtures/FakeResponsesServer.js"
import { failsAs } from "./fixtures/stepFailures.js"

const streamed = (apiUrl: string) =>
  Effect.flatMap(ModelProvider, (provider) =>
    Stream.runCollect(
      streamOf(provider, {
        requestId: "step:t#1",
        transcript: [{ role: "user", content: "x" }],
        tools: toolDefinitions
      })
    )
  ).pipe(
    Effect.map(Chunk.toReadonlyArray),
    Effect.provide(OpenAiProvider.layer({ apiUrl, apiKey: Redacted.make("sk-test"), model: "gpt-test" }))
  )

describe("OpenAiProvider streaming (Responses API server-sent events)", () => {
  it.scoped(
    "a response the provider reports failed is the step's failure, with the provider's message, never an answer",
    () =>
      Effect.gen(function* () {
        const server = yield* FakeResponsesServer.make([
          { type: "text", text: "Hal", failWith: { code: "server_error", message: "The model had an internal error." } }
        ])
        yield* failsAs(streamed(server.apiUrl), "The model had an internal error.")
      })
  )

  it.scoped(
    "a response the provider ends incomplete (the output limit, a content filter) fails the step for good, saying why, and is not taken as the answer",
    () =>
      Effect.gen(function* () {
        const server = yield* FakeResponsesServer.make([
          { type: "text", text: "The answer is fo", incomplete: "max_output_tokens" }
        ])
        yield* failsAs(streamed(server.apiUrl), "incomplete (max_output_tokens)", "malformed-response")
      })
  )

  it.scoped(
    "a tool call whose arguments are not JSON fails the step as one asking again may cure, naming the tool",
    () =>
      Effect.gen(function* () {
        const server = yield* FakeResponsesServer.make([
          { type: "function_call", callId: "call_x", name: "publish", arguments: {}, rawArguments: '{"path": "a.md", ' }
        ])
        yield* failsAs(streamed(server.apiUrl), "the arguments of the model's call of 'publish' are not JSON")
      })
  )

  it.scoped(
    "a stream whose connection closes before the response ends fails the step as one asking again may cure",
    () =>
      Effect.gen(function* () {
        const server = yield* FakeResponsesServer.make([
          { type: "text", text: "Hello wor", chunks: ["Hel", "lo wor"], cutAfterChunks: true }
        ])
        yield* failsAs(streamed(server.apiUrl), "the stream ended before the response did")
      })
  )

  it.scoped("text deltas come as the server sends them, then the assembled response", () =>
    Effect.gen(function* () {
      const server = yield* FakeResponsesServer.make([
        { type: "text", text: "Hello world", chunks: ["Hel", "lo ", "world"] }
      ])
      const parts = yield* streamed(server.apiUrl)
      assert.strictEqual(server.requests()[0]?.body.stream, true)
      assert.strictEqual(server.requests()[0]?.body.metadata?.request_id, "step:t#1")
      assert.deepStrictEqual(parts, [
        { type: "text-delta", text: "Hel" },
        { type: "text-delta", text: "lo " },
        { type: "text-delta", text: "world" },
        { type: "finished", response: { text: "Hello world", toolCalls: [] } }
      ] satisfies ReadonlyArray<ModelStepPart>)
    })
  )

  it.scoped("a tool call's argument deltas stream, and the call comes whole with the response", () =>
    Effect.gen(function* () {
      const server = yield* FakeResponsesServer.make([
        { type: "function_call", callId: "call_x", name: "publish", arguments: { path: "a.md", content: "hi" } }
      ])
      const parts = yield* streamed(server.apiUrl)
      const deltas = parts.filter((p) => p.type === "tool-call-delta")
      assert.strictEqual(deltas.length, 2)
      assert.deepStrictEqual(
        deltas.map((d) => [d.callId, d.name]),
        [
          ["call_x", "publish"],
          ["call_x", "publish"]
        ]
      )
      assert.strictEqual(deltas.map((d) => d.delta).join(""), JSON.stringify({ path: "a.md", content: "hi" }))
      assert.deepStrictEqual(parts.at(-1), {
        type: "finished",
        response: {
          text: "",
          toolCalls: [{ id: "call_x", name: "publish", arguments: { path: "a.md", content: "hi" } }]
        }
      })
    })
  )
})
