import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Option, Redacted } from "effect"
import { mcpToolDefinition } from "../src/AgentReactor.js"
import * as OpenAiProvider from "../src/OpenAiProvider.js"
import { ModelProvider, stepRequestId } from "../src/Provider.js"
import { toolDefinitions } from "../src/Tools.js"
import { type TranscriptMessage, validateTranscript } from "../src/Transcript.js"
import * as FakeResponsesServer from "./fixtures/FakeResponsesServer.js"
import { failsAs } from "./fixtures/stepFailures.js"

const withProvider = <A, E>(apiUrl: string, use: (provider: ModelProvider["Type"]) => Effect.Effect<A, E>) =>
  Effect.flatMap(ModelProvider, use).pipe(
    Effect.provide(OpenAiProvider.layer({ apiUrl, apiKey: Redacted.make("sk-test"), model: "gpt-test" }))
  )

describe("OpenAiProvider against a local Responses API", () => {
  it.scoped("an MCP tool is sent with the server's own input schema", () =>
    Effect.gen(function* () {
      const server = yield* FakeResponsesServer.make([{ type: "text", text: "ok" }])
      const inputSchema = {
        type: "object",
        properties: { text: { type: "string", description: "what to echo" } },
        required: ["text"]
      }
      const tool = mcpToolDefinition({
        server: "fixture",
        tool: "echo",
        name: "fixture__echo",
        description: "Echo the text back.",
        inputSchema,
        onProcessLoss: "replay-safe"
      })
      yield* withProvider(server.apiUrl, (provider) =>
        provider.step({ requestId: "step:t#1", transcript: [{ role: "user", content: "x" }], tools: [tool] })
      )
      const sent = server.requests()[0]?.body.tools?.[0] as Record<string, unknown> | undefined
      assert.deepStrictEqual(
        [sent?.name, sent?.description, sent?.parameters],
        ["fixture__echo", "Echo the text back.", inputSchema]
      )
    })
  )

  it.scoped("a two-step tool-using exchange completes", () =>
    Effect.gen(function* () {
      const server = yield* FakeResponsesServer.make([
        { type: "function_call", callId: "call_abc", name: "publish", arguments: { path: "a.md", content: "hi" } },
        { type: "text", text: "published a.md" }
      ])
      let transcript: ReadonlyArray<TranscriptMessage> = [{ role: "user", content: "publish a.md" }]

      const first = yield* withProvider(server.apiUrl, (provider) =>
        provider.step({ requestId: stepRequestId("turn-1", 1), transcript, tools: toolDefinitions })
      )
      assert.deepStrictEqual(first, {
        text: "",
        toolCalls: [{ id: "call_abc", name: "publish", arguments: { path: "a.md", content: "hi" } }]
      })

      transcript = [
        ...transcript,
        {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: "call_abc",
              type: "function",
              function: { name: "publish", arguments: '{"path":"a.md","content":"hi"}' }
            }
          ]
        },
        { role: "tool", tool_call_id: "call_abc", content: '{"cid":"8f43","newVersion":true}' }
      ]
      const second = yield* withProvider(server.apiUrl, (provider) =>
        provider.step({ requestId: stepRequestId("turn-1", 2), transcript, tools: toolDefinitions })
      )
      assert.deepStrictEqual(second, { text: "published a.md", toolCalls: [] })
      assert.isTrue(validateTranscript([...transcript, { role: "assistant", content: second.text }]).valid)

      const requests = server.requests()
      assert.deepStrictEqual(
        requests.map((request) => [request.method, request.url]),
        [
          ["POST", "/v1/responses"],
          ["POST", "/v1/responses"]
        ]
      )
      assert.strictEqual(requests[0]?.authorization, "Bearer sk-test")
      assert.deepStrictEqual(
        requests.map((request) => request.body.metadata),
        [{ request_id: "step:turn-1#1" }, { request_id: "step:turn-1#2" }]
      )
      assert.deepStrictEqual(
        requests[0]?.body.tools?.map((tool) => [tool.type, tool.name]),
        toolDefinitions.map((definition) => ["function", definition.name])
      )
      // The history went in as Responses items: the call, then its output, unchanged JSON.
      const input = requests[1]?.body.input ?? []
      assert.deepStrictEqual(
        input.map((item) => item.type ?? item.role),
        ["user", "function_call", "function_call_output"]
      )
      assert.deepStrictEqual(input[1], {
        ...input[1],
        call_id: "call_abc",
        name: "publish",
        arguments: '{"path":"a.md","content":"hi"}'
      })
      assert.strictEqual(input[2]?.output, '{"cid":"8f43","newVersion":true}')
    })
  )

  it.scoped(
    "a response the provider returns as failed is a retryable ProviderError with its message, not an answer",
    () =>
      Effect.gen(function* () {
        const server = yield* FakeResponsesServer.make([
          {
            type: "text",
            text: "partial",
            failWith: { code: "server_error", message: "The model had an internal error." }
          }
        ])
        const exit = yield* Effect.exit(
          withProvider(server.apiUrl, (provider) =>
            provider.step({
              requestId: "step:t#1",
              transcript: [{ role: "user", content: "x" }],
              tools: toolDefinitions
            })
          )
        )
        assert.isTrue(Exit.isFailure(exit), `the step must fail, got ${JSON.stringify(exit)}`)
        const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
        assert.strictEqual(error?.reason, "unavailable")
        assert.include(error?.message ?? "", "The model had an internal error.")
      })
  )

  it.scoped(
    "an incomplete response fails the turn at once, saying why; a tool call whose arguments are not JSON fails the step as one asking again may cure",
    () =>
      Effect.gen(function* () {
        const server = yield* FakeResponsesServer.make([
          { type: "text", text: "cut sho", incomplete: "content_filter" },
          { type: "function_call", callId: "call_x", name: "publish", arguments: {}, rawArguments: "{not json" }
        ])
        const step = withProvider(server.apiUrl, (provider) =>
          provider.step({
            requestId: "step:t#1",
            transcript: [{ role: "user", content: "x" }],
            tools: toolDefinitions
          })
        )
        yield* failsAs(step, "incomplete (content_filter)", "malformed-response")
        yield* failsAs(step, "the arguments of the model's call of 'publish' are not JSON")
      })
  )

  it.scoped("an orphan tool result is refused by the provider and surfaces as a typed ProviderError", () =>
    Effect.gen(function* () {
      const server = yield* FakeResponsesServer.make([])
      const transcript: ReadonlyArray<TranscriptMessage> = [
        { role: "user", content: "go" },
        { role: "tool", tool_call_id: "call_zzz", content: "{}" }
      ]
      const error = yield* Effect.flip(
        withProvider(server.apiUrl, (provider) =>
          provider.step({ requestId: stepRequestId("turn-9", 1), transcript, tools: toolDefinitions })
        )
      )
      assert.strictEqual(error._tag, "ProviderError")
      assert.strictEqual(error.reason, "rejected")
      assert.strictEqual(error.status, 400)
      assert.strictEqual(error.requestId, "step:turn-9#1")
      assert.strictEqual(error.message, "No tool call found for function call output with call_id call_zzz.")
      // Our validator names the same problem before any provider is asked.
      assert.include(validateTranscript(transcript).problems[0]?.message, "No tool call found for function call output")
    })
  )

  it.scoped("arguments the tool would refuse still reach us as a tool call, for the performer to answer", () =>
    Effect.gen(function* () {
      const server = yield* FakeResponsesServer.make([
        { type: "function_call", callId: "call_bad", name: "publish", arguments: { path: "../etc/passwd" } }
      ])
      const answer = yield* withProvider(server.apiUrl, (provider) =>
        provider.step({ requestId: "step:t#1", transcript: [{ role: "user", content: "x" }], tools: toolDefinitions })
      )
      assert.deepStrictEqual(answer.toolCalls, [
        { id: "call_bad", name: "publish", arguments: { path: "../etc/passwd" } }
      ])
    })
  )

  it.scoped("a wrong base URL is refused with its status, not reported as retryable", () =>
    Effect.gen(function* () {
      const server = yield* FakeResponsesServer.make([])
      const error = yield* Effect.flip(
        withProvider(server.apiUrl.replace("/v1", "/nope"), (provider) =>
          provider.step({ requestId: "step:t#1", transcript: [{ role: "user", content: "x" }], tools: [] })
        )
      )
      assert.deepStrictEqual([error.reason, error.status], ["rejected", 404])
    })
  )

  it.live("an interrupted step aborts its HTTP request: the server sees the connection closed unanswered", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* FakeResponsesServer.make([{ type: "hang" }])
        const transcript: ReadonlyArray<TranscriptMessage> = [{ role: "user", content: "think forever" }]
        const fiber = yield* Effect.fork(
          withProvider(server.apiUrl, (provider) =>
            provider.step({ requestId: stepRequestId("turn-1", 1), transcript, tools: toolDefinitions })
          )
        )
        const until = (condition: () => boolean) =>
          Effect.promise(async () => {
            for (let i = 0; i < 500 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10))
          })
        yield* until(() => server.requests().length === 1)
        assert.strictEqual(server.requests().length, 1, "the request never arrived")
        assert.strictEqual(server.aborted(), 0)
        yield* Fiber.interrupt(fiber)
        yield* until(() => server.aborted() === 1)
        assert.strictEqual(server.aborted(), 1, "the request was left open after its step was interrupted")
      })
    )
  )

  it.effect("a server that is gone is a typed ProviderError marked unavailable", () =>
    Effect.gen(function* () {
      // The server's scope has closed: its port now refuses connections.
      const apiUrl = yield* Effect.scoped(Effect.map(FakeResponsesServer.make([]), (server) => server.apiUrl))
      const error = yield* Effect.flip(
        withProvider(apiUrl, (provider) =>
          provider.step({ requestId: "step:t#1", transcript: [{ role: "user", content: "x" }], tools: [] })
        )
      )
      assert.deepStrictEqual([error._tag, error.reason, error.status], ["ProviderError", "unavailable", undefined])
    })
  )

  it("a transcript whose call arguments are not JSON cannot be converted", () => {
    const converted = OpenAiProvider.toPrompt([
      { role: "user", content: "x" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c", type: "function", function: { name: "execute", arguments: "{" } }]
      }
    ])
    assert.strictEqual(converted._tag, "Left")
  })
})
