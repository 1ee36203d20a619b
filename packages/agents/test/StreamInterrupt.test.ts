/**
 * An interrupted streaming step keeps all of its partial text: what the provider sent after the
 * last timed flush (less than 50 ms of it, still buffered) is flushed as the step stops, before its
 * stop is acknowledged, so the recorded partial text is everything the provider sent. TestClock.
 */
import { assert, describe, it } from "@effect/vitest"
import { Engine, Outbox } from "@orchestration/engine"
import { Effect, TestClock } from "effect"
import { attemptState, channelText, stepOfEffect } from "../src/StepStreams.js"
import { transcriptView } from "../src/ThreadReadModel.js"
import { advanceUntil, agentsStack, eventually, interrupt, script, send, turnStatus } from "./fixtures/agents.js"

const chunksOf = (effectId: string) => Effect.flatMap(Engine.Engine, (engine) => engine.readStreamChunks(effectId))

describe("an interrupted streaming step", () => {
  it.effect("keeps the text buffered since its last flush: the partial text is all the provider sent", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const pieces = Array.from({ length: 20 }, (_, i) => `p${i} `)
      yield* engine.dispatchWithReceipt(send("si", "m1", script({ chunks: pieces, chunkDelayMs: 10 })))
      const effectId = "step:si:m1#1"
      // Piece i is sent at start + 10 (i + 1) ms. Stepping the clock to start + 5, + 55, + 65, + 75 keeps
      // every instant between two pieces, so what was sent by then does not depend on which of two
      // timers due at one instant runs first. Flush windows end on multiples of 50 ms of the clock,
      // so one flush lands by start + 55 and the pieces after it are still buffered.
      yield* advanceUntil(
        Effect.map(Outbox.find(effectId), (row) => row?.status === "running"),
        "running"
      )
      yield* TestClock.adjust("5 millis")
      yield* eventually(Effect.succeed(true), "settle", 50)
      yield* TestClock.adjust("50 millis")
      yield* eventually(
        Effect.map(chunksOf(effectId), (chunks) => chunks.length === 1),
        "the first flush"
      )
      yield* TestClock.adjust("10 millis")
      yield* eventually(Effect.succeed(true), "settle", 50)
      yield* TestClock.adjust("10 millis")
      yield* eventually(Effect.succeed(true), "settle", 50)
      const flushed = channelText(yield* chunksOf(effectId), 1)
      assert.isTrue(pieces.join("").startsWith(flushed) && flushed.length > 0, flushed)
      yield* engine.dispatchWithReceipt(interrupt("si", "si:m1"))
      // The clock does not move: the tail lands as the step stops, not at a later timed flush.
      yield* eventually(
        Effect.map(turnStatus("si"), (turns) => turns[0]?.status === "interrupted"),
        "turn interrupted"
      )
      yield* eventually(
        Effect.map(Outbox.find(effectId), (row) => row?.status === "cancelled" && row.leaseOwner === null),
        "stop acknowledged"
      )
      const recorded = channelText(yield* chunksOf(effectId), 1)
      // Everything sent before the interrupt at start + 75 ms: pieces 0 to 6, the flushed part and the rest.
      assert.strictEqual(recorded, pieces.slice(0, 7).join(""))
      assert.isAbove(recorded.length, flushed.length)
      assert.strictEqual(attemptState((yield* stepOfEffect(effectId))!, 1), "interrupted")
      assert.isFalse((yield* transcriptView("si"))!.messages.some((m) => m.role === "assistant"))
    }).pipe(Effect.provide(agentsStack()))
  )
})
