import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Ref, Stream, TestClock } from "effect"
import { type ModelStepPart, runStream, stepRequestId, streamOf } from "../src/Provider.js"
import * as ScriptedProvider from "../src/ScriptedProvider.js"

const request = (script: ReadonlyArray<unknown>) => ({
  requestId: stepRequestId("turn-1", 1),
  transcript: [{ role: "user" as const, content: JSON.stringify({ script }) }],
  tools: []
})

describe("scripted provider streaming", () => {
  it.effect("a step with chunks streams them in order, each after its delay on the clock, then its response", () =>
    Effect.gen(function* () {
      const seen = yield* Ref.make<ReadonlyArray<string>>([])
      const fiber = yield* runStream(
        request([{ chunks: ["Hel", "lo, ", "world"], chunkDelayMs: 100 }]),
        "scripted",
        streamOf(ScriptedProvider.make, request([{ chunks: ["Hel", "lo, ", "world"], chunkDelayMs: 100 }])),
        (part) => Ref.update(seen, (xs) => [...xs, part.type === "text-delta" ? part.text : part.type])
      ).pipe(Effect.fork)
      yield* TestClock.adjust("99 millis")
      assert.deepStrictEqual(yield* Ref.get(seen), [])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Ref.get(seen), ["Hel"])
      yield* TestClock.adjust("200 millis")
      const response = yield* Fiber.join(fiber)
      assert.deepStrictEqual(yield* Ref.get(seen), ["Hel", "lo, ", "world"])
      assert.deepStrictEqual(response, { text: "Hello, world", toolCalls: [] })
    })
  )

  it.effect("a step without chunks streams its text as one delta, then each tool call's arguments as deltas", () =>
    Effect.gen(function* () {
      const parts = yield* Stream.runCollect(
        streamOf(ScriptedProvider.make, request([{ text: "hm", toolCalls: [{ name: "publish", arguments: {} }] }]))
      )
      assert.deepStrictEqual(Chunk.toReadonlyArray(parts), [
        { type: "text-delta", text: "hm" },
        { type: "tool-call-delta", callId: "call_1_0", name: "publish", delta: "{}" },
        {
          type: "finished",
          response: { text: "hm", toolCalls: [{ id: "call_1_0", name: "publish", arguments: {} }] }
        }
      ] satisfies ReadonlyArray<ModelStepPart>)
    })
  )

  it.effect("chunks that do not concatenate to the given text are a malformed script", () =>
    Effect.gen(function* () {
      const error = yield* Stream.runDrain(
        streamOf(ScriptedProvider.make, request([{ text: "abc", chunks: ["a", "b"] }]))
      ).pipe(Effect.flip)
      assert.strictEqual(error.reason, "invalid-request")
      assert.match(error.message, /do not concatenate/)
    })
  )

  it.effect("a stream that ends without its response is a malformed answer", () =>
    Effect.gen(function* () {
      const error = yield* runStream(
        request([]),
        "x",
        Stream.succeed<ModelStepPart>({ type: "text-delta", text: "a" }),
        () => Effect.void
      ).pipe(Effect.flip)
      assert.strictEqual(error._tag === "ProviderError" ? error.reason : "", "malformed-response")
    })
  )

  it.effect("a tool call's argument deltas concatenate to its arguments' JSON, cut between whole characters", () =>
    Effect.gen(function* () {
      const args = { path: "notes/😀.md", content: "🎉 done, 👍🏽" }
      const parts = yield* Stream.runCollect(
        streamOf(ScriptedProvider.make, request([{ toolCalls: [{ name: "publish", arguments: args }] }]))
      )
      const deltas = Chunk.toReadonlyArray(parts).flatMap((p) => (p.type === "tool-call-delta" ? [p.delta] : []))
      assert.isAbove(deltas.length, 2)
      assert.strictEqual(deltas.join(""), JSON.stringify(args))
      for (const d of deltas) assert.isFalse(/[\ud800-\udbff]$/.test(d) || /^[\udc00-\udfff]/.test(d), d)
    })
  )
})
