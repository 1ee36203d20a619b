import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { ModelProvider, stepRequestId } from "../src/Provider.js"
import * as ScriptedProvider from "../src/ScriptedProvider.js"
import { toolDefinitions } from "../src/Tools.js"
import { type TranscriptMessage, validateTranscript } from "../src/Transcript.js"

const script = JSON.stringify({
  script: [
    {
      toolCalls: [
        { name: "publish", arguments: { path: "a.md", content: "hi" } },
        { name: "execute", arguments: { command: "make" } }
      ]
    },
    { text: "thinking", toolCalls: [{ name: "delegate", arguments: { threadId: "t2", text: "review" } }] },
    { text: "all published" }
  ]
})

const step = (transcript: ReadonlyArray<TranscriptMessage>, n = 1) =>
  Effect.flatMap(ModelProvider, (provider) =>
    provider.step({ requestId: stepRequestId("turn-1", n), transcript, tools: toolDefinitions })
  ).pipe(Effect.provide(ScriptedProvider.layer))

/** The transcript after the model's answer and a result for each of its calls. */
const advance = (
  transcript: ReadonlyArray<TranscriptMessage>,
  answer: {
    readonly text: string
    readonly toolCalls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments: unknown }>
  }
): ReadonlyArray<TranscriptMessage> => [
  ...transcript,
  answer.toolCalls.length === 0
    ? { role: "assistant", content: answer.text }
    : {
        role: "assistant",
        content: answer.text === "" ? null : answer.text,
        tool_calls: answer.toolCalls.map((call) => ({
          id: call.id,
          type: "function" as const,
          function: { name: call.name, arguments: JSON.stringify(call.arguments) }
        }))
      },
  ...answer.toolCalls.map(
    (call): TranscriptMessage => ({ role: "tool", tool_call_id: call.id, content: '{"ok":true}' })
  )
]

describe("ScriptedProvider", () => {
  it.effect('each step of a turn answers the next script step, then "done"', () =>
    Effect.gen(function* () {
      let transcript: ReadonlyArray<TranscriptMessage> = [{ role: "user", content: script }]
      const first = yield* step(transcript, 1)
      assert.deepStrictEqual(first, {
        text: "",
        toolCalls: [
          { id: "call_1_0", name: "publish", arguments: { path: "a.md", content: "hi" } },
          { id: "call_1_1", name: "execute", arguments: { command: "make" } }
        ]
      })
      transcript = advance(transcript, first)
      const second = yield* step(transcript, 2)
      assert.deepStrictEqual(second, {
        text: "thinking",
        toolCalls: [{ id: "call_2_0", name: "delegate", arguments: { threadId: "t2", text: "review" } }]
      })
      transcript = advance(transcript, second)
      assert.deepStrictEqual(yield* step(transcript, 3), { text: "all published", toolCalls: [] })
      transcript = advance(transcript, yield* step(transcript, 3))
      assert.deepStrictEqual(yield* step(transcript, 4), { text: "done", toolCalls: [] })
      assert.isTrue(validateTranscript(transcript).valid)
    })
  )

  it.effect("the same transcript always gives the same answer", () =>
    Effect.gen(function* () {
      const transcript: ReadonlyArray<TranscriptMessage> = [{ role: "user", content: script }]
      assert.deepStrictEqual(yield* step(transcript), yield* step(transcript))
    })
  )

  it.effect("a later message starts its own turn at step 1 of its own script", () =>
    Effect.gen(function* () {
      const earlier: ReadonlyArray<TranscriptMessage> = [
        { role: "user", content: script },
        { role: "assistant", content: "done" }
      ]
      const next = JSON.stringify({
        script: [{ toolCalls: [{ name: "trigger_edit", arguments: { triggerId: "n", spec: {} } }] }]
      })
      const answer = yield* step([...earlier, { role: "user", content: next }])
      assert.deepStrictEqual(answer.toolCalls, [
        { id: "call_1_0", name: "trigger_edit", arguments: { triggerId: "n", spec: {} } }
      ])
    })
  )

  it.effect("ordinary text is echoed without tool calls", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* step([{ role: "user", content: "hello there" }]), {
        text: "echo: hello there",
        toolCalls: []
      })
      // JSON that is not a script is ordinary text too.
      assert.deepStrictEqual(yield* step([{ role: "user", content: '{"a":1}' }]), {
        text: 'echo: {"a":1}',
        toolCalls: []
      })
    })
  )

  it.effect("a call without arguments gets an empty object; an unknown tool name is passed through", () =>
    Effect.gen(function* () {
      const content = JSON.stringify({ script: [{ toolCalls: [{ name: "no_such_tool" }] }] })
      const answer = yield* step([{ role: "user", content }])
      assert.deepStrictEqual(answer.toolCalls, [{ id: "call_1_0", name: "no_such_tool", arguments: {} }])
    })
  )

  it.effect("a malformed script step or a transcript without a user message fails typed", () =>
    Effect.gen(function* () {
      const malformed = yield* Effect.flip(
        step([{ role: "user", content: JSON.stringify({ script: [{ toolCalls: "x" }] }) }])
      )
      assert.strictEqual(malformed._tag, "ProviderError")
      assert.strictEqual(malformed.reason, "invalid-request")
      assert.strictEqual(malformed.requestId, "step:turn-1#1")
      assert.include(malformed.message, "script step 1")
      const empty = yield* Effect.flip(step([]))
      assert.include(empty.message, "no user message")
    })
  )
})
