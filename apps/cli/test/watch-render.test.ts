/**
 * What `threads watch` prints for a thread stream's messages (pure): the answer's text as it
 * grows, and each tool call's arguments as they stream, under a head per call, decoded from the
 * server's `event: tool-delta` frames.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import { emptyScreen, renderMessage } from "../src/commands/ThreadWatch.js"
import { type ThreadMessage, threadMessages } from "../src/ServerClient.js"

const frame = (id: string, event: string, data: unknown) => [
  `id: ${id}`,
  `event: ${event}`,
  `data: ${JSON.stringify(data)}`,
  ""
]
const base = { turnId: "t:m1", step: 1, attempt: 1 }

describe("threads watch: tool-call argument deltas", () => {
  it.effect("tool-delta frames decode and print after their call's head; the pieces of one call run on", () =>
    Effect.gen(function* () {
      const lines = [
        ...frame("5:1:1:4:t:m1", "delta", { ...base, offset: 0, text: "Sure" }),
        ...frame("5:1:1:14:t:m1", "tool-delta", { ...base, toolCallId: "call_a", offset: 0, text: '{"path":"' }),
        ...frame("5:1:1:22:t:m1", "tool-delta", { ...base, toolCallId: "call_a", offset: 9, text: 'a.md"}' }),
        ...frame("5:1:1:29:t:m1", "tool-delta", { ...base, toolCallId: "call_b", offset: 0, text: '{"q":1}' }),
        ...frame("5:1:1:30:t:m1", "delta", { ...base, offset: 4, text: "." })
      ]
      const messages = Chunk.toReadonlyArray(yield* Stream.runCollect(threadMessages(Stream.fromIterable(lines))))
      assert.deepStrictEqual(
        messages.map((m) => m._tag),
        ["Delta", "ToolDelta", "ToolDelta", "ToolDelta", "Delta"]
      )
      let screen = emptyScreen
      let out = ""
      for (const message of messages as ReadonlyArray<ThreadMessage>) {
        const rendered = renderMessage(screen, message)
        screen = rendered.screen
        out += rendered.text
      }
      assert.strictEqual(
        out,
        [
          "assistant (step 1, attempt 1): Sure",
          'tool call call_a (step 1, attempt 1) arguments: {"path":"a.md"}',
          'tool call call_b (step 1, attempt 1) arguments: {"q":1}',
          "assistant (step 1, attempt 1): ."
        ].join("\n")
      )
    })
  )
})
