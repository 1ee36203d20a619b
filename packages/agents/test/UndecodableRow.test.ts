/**
 * A thread's effect row whose stored payload is not JSON (cut off, hand-edited, a bad migration):
 * the reactor never performs it and fails it for good (`payload-undecodable`); the thread must hear
 * that failure as any other, not throw on the missing payload and leave the row parked for an operator.
 * Likewise a transcript message that is not JSON: the step fails with why, not with the parser's defect.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Engine, Outbox } from "@orchestration/engine"
import { Effect, Layer } from "effect"
import { ModelProvider, ProviderError } from "../src/Provider.js"
import { stepsOfThread } from "../src/StepStreams.js"
import { transcriptView } from "../src/ThreadReadModel.js"
import { advanceUntil, agentsStack, allTurnsTerminal, send, turnStatus } from "./fixtures/agents.js"

/** A provider that is down: every step fails retryably, so the step's row waits pending for its retry. */
const down = () => {
  const counted = { asked: 0 }
  const layer = Layer.succeed(ModelProvider, {
    step: (request) =>
      Effect.suspend(() => {
        counted.asked++
        return Effect.fail(
          new ProviderError({ provider: "test", requestId: request.requestId, reason: "unavailable", message: "down" })
        )
      })
  })
  return { counted, layer }
}

describe("a thread's effect row whose stored payload cannot be read", () => {
  it.effect("fails the turn with the stored reason, unperformed; the row is failed, not quarantined", () => {
    const provider = down()
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const sql = yield* SqlClient
      const effectId = "step:u1:m1#1"
      yield* engine.dispatchWithReceipt(send("u1", "m1", "hi"))
      yield* advanceUntil(
        Effect.map(Outbox.find(effectId), (row) => row?.status === "pending" && row.attempts >= 1),
        "the step failed once and waits for its retry"
      )
      // A damaged payload, as a bad migration or a hand edit would leave it.
      yield* sql`UPDATE outbox SET payload = ${'{"threadId":"u1","turnId":'} WHERE effect_id = ${effectId}`

      yield* advanceUntil(allTurnsTerminal("u1", 1), "the turn ended")
      const [turn] = yield* turnStatus("u1")
      assert.strictEqual(turn!.status, "failed")
      assert.match(turn!.reason ?? "", /^model step failed: not performed: /)
      const row = (yield* Outbox.find(effectId))!
      assert.strictEqual(row.status, "failed")
      assert.strictEqual((row.error as { code?: string } | null)?.code, "payload-undecodable")
      assert.strictEqual(provider.counted.asked, 1, "the damaged row was never performed again")
      assert.isTrue((yield* transcriptView("u1"))!.valid)
      // The thread's steps still list, the damaged one without the turn and step its payload held.
      const steps = yield* stepsOfThread("u1")
      assert.deepStrictEqual(
        steps.map((s) => [s.effectId, s.status, s.turnId]),
        [[effectId, "failed", ""]]
      )
    }).pipe(Effect.provide(agentsStack({ provider: provider.layer })))
  })
})

/** A user message as damage leaves it: cut off, or JSON that is no message (a hand edit, a bad migration). */
const damagedMessages = [
  [
    "cut off",
    '{"role":"user","content":"h',
    /^model step failed: message 1 of thread '[^']+' cannot be read: its stored message is not JSON \(/
  ],
  [
    "of another shape",
    '{"role":"user","text":"hi"}',
    /^model step failed: message 1 of thread '[^']+' cannot be read: its stored message does not have the expected shape \(content is missing\)$/
  ]
] as const

describe("a thread whose stored transcript message cannot be read", () => {
  for (const [what, damaged, reason] of damagedMessages)
    it.effect(
      `(${what}) its model step fails for good with why, the model never sent the transcript with a hole`,
      () => {
        const provider = down()
        return Effect.gen(function* () {
          const engine = yield* Engine.Engine
          const sql = yield* SqlClient
          const effectId = "step:u2:m1#1"
          yield* engine.dispatchWithReceipt(send("u2", "m1", "hi"))
          yield* advanceUntil(
            Effect.map(Outbox.find(effectId), (row) => row?.status === "pending" && row.attempts >= 1),
            "the step failed once and waits for its retry"
          )
          // The user's message, damaged as a bad migration or a hand edit would leave it.
          yield* sql`UPDATE agent_messages SET message = ${damaged} WHERE thread_id = 'u2'`

          yield* advanceUntil(allTurnsTerminal("u2", 1), "the turn ended")
          const [turn] = yield* turnStatus("u2")
          assert.strictEqual(turn!.status, "failed")
          assert.match(turn!.reason ?? "", reason)
          const row = (yield* Outbox.find(effectId))!
          assert.strictEqual(row.status, "failed")
          assert.strictEqual((row.error as { code?: string } | null)?.code, "transcript-unreadable")
          assert.strictEqual(provider.counted.asked, 1, "the model was not asked again")
        }).pipe(Effect.provide(agentsStack({ provider: provider.layer })))
      }
    )
})
