/**
 * A thread's effect row whose stored payload is not JSON (cut off, hand-edited, a bad migration):
 * the reactor never performs it and fails it for good (`payload-undecodable`); the thread must hear
 * that failure as any other, not throw on the missing payload and leave the row parked for an operator.
 * Likewise a transcript message that is not JSON: the step fails with why, not with the parser's defect.
 * A payload that is JSON of another shape is damage too: its handler is not run on fields it lacks.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Engine, Outbox } from "@orchestration/engine"
import { Effect, Layer } from "effect"
import { join } from "node:path"
import { ModelProvider, ProviderError } from "../src/Provider.js"
import { stepsOfThread } from "../src/StepStreams.js"
import { transcriptView } from "../src/ThreadReadModel.js"
import { World } from "../src/World.js"
import {
  advanceUntil,
  agentsStack,
  allTurnsTerminal,
  script,
  send,
  tempDir,
  turnStatus,
  waitFor
} from "./fixtures/agents.js"
import { callsOf, fixtureConfig, mcpConfig } from "./fixtures/mcp.js"

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

/**
 * Every `kind` row is stored as `edit` (a SQLite expression over `NEW.payload`) leaves it, as an older
 * version, a hand edit or a bug might have written it: in the transaction that writes the row, so its
 * handler never sees it whole.
 */
const storedDamaged = (kind: string, edit: string) =>
  Effect.flatMap(SqlClient, (sql) =>
    sql.unsafe(
      `CREATE TRIGGER damage_${kind.replace(/\W/g, "_")} AFTER INSERT ON outbox WHEN NEW.kind = '${kind}'
       BEGIN UPDATE outbox SET payload = ${edit} WHERE effect_id = NEW.effect_id; END`
    )
  )

/** The row's stored failure: what the thread and an operator read. */
const failureOf = (row: Outbox.OutboxRow) => row.error as { message?: string; code?: string; reason?: string } | null

const assertUnperformed = (row: Outbox.OutboxRow | undefined, message: RegExp) => {
  assert.strictEqual(row?.status, "failed")
  const error = failureOf(row!)
  assert.strictEqual(error?.code, "payload-undecodable")
  assert.strictEqual(error?.reason, "defect")
  assert.match(error?.message ?? "", message)
  assert.strictEqual(row!.attempts, 1, "failed for good: asking again reads the same stored payload")
}

describe("a thread's effect row whose stored payload is JSON of another shape", () => {
  it.effect("(a model step without its thread) fails the turn for good, unperformed: the model is never asked", () => {
    const provider = down()
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* storedDamaged("model.step", "json_remove(NEW.payload, '$.threadId')")
      yield* engine.dispatchWithReceipt(send("s1", "m1", "hi"))

      yield* advanceUntil(allTurnsTerminal("s1", 1), "the turn ended")
      assertUnperformed(
        yield* Outbox.find("step:s1:m1#1"),
        /^not performed: its stored model\.step payload does not have the expected shape \(threadId is missing\)$/
      )
      const [turn] = yield* turnStatus("s1")
      assert.strictEqual(turn!.status, "failed")
      assert.match(turn!.reason ?? "", /^model step failed: not performed: /)
      assert.strictEqual(provider.counted.asked, 0, "the model was never asked")
      assert.isTrue((yield* transcriptView("s1"))!.valid)
    }).pipe(Effect.provide(agentsStack({ provider: provider.layer })))
  })

  it.effect(
    "(a tool call without its thread) is never performed on the world; the call's result says why and the turn goes on",
    () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const world = yield* World
        yield* storedDamaged("tool.publish", "json_remove(NEW.payload, '$.threadId')")
        const model = script(
          { toolCalls: [{ name: "publish", arguments: { path: "a.md", content: "hello" } }] },
          { text: "done" }
        )
        yield* engine.dispatchWithReceipt(send("s2", "m1", model))

        yield* advanceUntil(allTurnsTerminal("s2", 1), "the turn ended")
        assertUnperformed(
          yield* Outbox.find("tool:s2:m1:call_1_0"),
          /^not performed: its stored tool\.publish payload does not have the expected shape \(threadId is missing\)$/
        )
        assert.deepStrictEqual(yield* world.readVersions("a.md"), [], "nothing was published")
        const [turn] = yield* turnStatus("s2")
        assert.strictEqual(turn!.status, "completed")
        const transcript = (yield* transcriptView("s2"))!
        assert.isTrue(transcript.valid, JSON.stringify(transcript.problems))
        assert.deepStrictEqual(
          transcript.messages.filter((m) => m.role === "tool").map((m) => m.content),
          [
            "error: not performed: its stored tool.publish payload does not have the expected shape (threadId is missing)"
          ]
        )
        assert.deepStrictEqual(transcript.messages.at(-1), { role: "assistant", content: "done" })
      }).pipe(Effect.provide(agentsStack()))
  )

  // No build wrote an MCP target without its policy (since MCP calls carry a target, the planner has
  // always set it from the tool's annotations, or "process-bound"); one that lacks it is damage, and
  // guessing its policy could repeat a call that must run at most once.
  it.live(
    "(an MCP call whose target lacks its policy) is never performed on the server; the call's result says why and the turn goes on",
    () => {
      const dir = tempDir("agents-mcp-undecodable-")
      const log = join(dir, "fixture.jsonl")
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const world = yield* World
        yield* storedDamaged("tool.mcp_call", "json_remove(NEW.payload, '$.mcp.onProcessLoss')")
        const model = script(
          { toolCalls: [{ name: "fixture__slow_write", arguments: { label: "x", sleepMs: 0 } }] },
          { text: "done" }
        )
        yield* engine.dispatchWithReceipt(send("s5", "m1", model))

        yield* waitFor(allTurnsTerminal("s5", 1), "the turn ended")
        assertUnperformed(
          yield* Outbox.find("tool:s5:m1:call_1_0"),
          /^not performed: its stored tool\.mcp_call payload does not have the expected shape \(mcp\.onProcessLoss is missing\)$/
        )
        assert.strictEqual(callsOf(log, "slow_write"), 0, "the server was never called")
        assert.deepStrictEqual(yield* world.readLedger, [], "no performance began")
        assert.strictEqual((yield* turnStatus("s5"))[0]!.status, "completed")
        const transcript = (yield* transcriptView("s5"))!
        assert.isTrue(transcript.valid, JSON.stringify(transcript.problems))
        assert.deepStrictEqual(
          transcript.messages.filter((m) => m.role === "tool").map((m) => m.content),
          [
            "error: not performed: its stored tool.mcp_call payload does not have the expected shape (mcp.onProcessLoss is missing)"
          ]
        )
      }).pipe(Effect.provide(agentsStack({ dir, mcp: mcpConfig({ fixture: fixtureConfig(log) }) })))
    }
  )

  it.effect("(a trigger's tick whose text is no string) sends no message; the tick fails for good with why", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const sql = yield* SqlClient
      yield* storedDamaged("trigger.fire", "json_set(NEW.payload, '$.text', 42)")
      yield* engine.dispatchWithReceipt({
        commandId: "put-1",
        type: "trigger.put",
        triggerId: "minutely",
        cron: "* * * * *",
        threadId: "s3",
        text: "check"
      })

      const tick = Effect.map(Outbox.list({ limit: 50 }), (rows) =>
        rows.find((r) => r.kind === "trigger.fire" && r.status !== "pending" && r.status !== "running")
      )
      yield* advanceUntil(
        Effect.map(tick, (row) => row !== undefined),
        "the first tick settled"
      )
      assertUnperformed(
        yield* tick,
        /^not performed: its stored trigger\.fire payload does not have the expected shape \(text: expected string\)$/
      )
      const sends = yield* sql`SELECT command_id FROM receipts WHERE command_type = 'message.send'`
      assert.deepStrictEqual(sends, [], "no message was sent")
      assert.deepStrictEqual(yield* turnStatus("s3"), [])
    }).pipe(Effect.provide(agentsStack()))
  )

  it.effect(
    "(an awaited turn's reply of another shape) is not sent; the reply fails for good and the waiting call ends at its deadline",
    () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* storedDamaged("delegate.reply", "json_set(NEW.payload, '$.turnStatus', 'done')")
        const parent = script(
          {
            toolCalls: [
              {
                name: "delegate",
                arguments: { threadId: "s4-helper", text: "summarise", await: true, timeoutSeconds: 5 }
              }
            ]
          },
          { text: "all done" }
        )
        yield* engine.dispatchWithReceipt(send("s4", "m1", parent))

        yield* advanceUntil(allTurnsTerminal("s4", 1), "the waiting turn ended")
        const replies = (yield* Outbox.list({ limit: 50 })).filter((r) => r.kind === "delegate.reply")
        assert.strictEqual(replies.length, 1)
        assertUnperformed(
          replies[0],
          /^not performed: its stored delegate\.reply payload does not have the expected shape \(turnStatus: expected "completed" \| "failed" \| "interrupted"\)$/
        )
        const [turn] = yield* turnStatus("s4")
        assert.strictEqual(turn!.status, "completed")
        const transcript = (yield* transcriptView("s4"))!
        assert.isTrue(transcript.valid, JSON.stringify(transcript.problems))
        const results = transcript.messages.filter((m) => m.role === "tool").map((m) => String(m.content))
        assert.strictEqual(results.length, 1)
        assert.match(results[0]!, /^error: timed out: thread 's4-helper' did not answer by /)
      }).pipe(Effect.provide(agentsStack()))
  )
})
