import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Engine, Outbox } from "@orchestration/engine"
import { TestStore } from "@orchestration/engine/testing"
import { Effect, Layer } from "effect"
import { Thread } from "../src/Thread.js"
import { pendingApprovals, ThreadViews, threadView, transcriptOf, transcriptView } from "../src/ThreadReadModel.js"

// The engine's tables (migrated), without the projection: the test builds the old table itself. A
// store per test: on PostgreSQL one TestStore.layer() is one schema, kept across the tests that use it.
const engineWithoutViews = () =>
  Engine.layer({ aggregates: [Thread], projections: [] }).pipe(Layer.provideMerge(TestStore.layer()))

describe("the tool-call read model", () => {
  it.effect(
    "a store from before the recorded status gets the column, filled from the late settlement, the settled row, else the result",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient
        // The table as an older version made it: no position, no status.
        yield* sql`CREATE TABLE agent_tool_calls (
        effect_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, turn_id TEXT NOT NULL, step INTEGER NOT NULL, call_id TEXT NOT NULL,
        transcript_id TEXT NOT NULL, name TEXT NOT NULL, arguments TEXT NOT NULL, result TEXT, outcome TEXT, late_status TEXT)`
        const calls: ReadonlyArray<readonly [string, string | null, string | null]> = [
          ["tool:late", "interrupted", "succeeded"],
          ["tool:kept-row", "interrupted", null],
          ["tool:pruned-ok", "succeeded", null],
          ["tool:pruned-storage", "storage", null],
          ["tool:unknown", "unknown-tool", null],
          ["tool:open", null, null]
        ]
        for (const [effectId, outcome, late] of calls) {
          yield* sql`INSERT INTO agent_tool_calls ${sql.insert({
            effect_id: effectId,
            thread_id: "t1",
            turn_id: "t1:m1",
            step: 1,
            call_id: effectId,
            transcript_id: effectId,
            name: "publish",
            arguments: "{}",
            result: outcome === null ? null : "r",
            outcome,
            late_status: late
          })}`
        }
        // Retention kept two rows: one cancelled when its turn was interrupted, one still running.
        for (const effectId of ["tool:kept-row", "tool:open"]) {
          yield* Outbox.insert([
            {
              effectId,
              commandId: "c",
              aggregateType: "thread",
              aggregateId: "t1",
              kind: "tool.publish",
              payloadJson: "{}",
              lane: "l",
              availableAt: 0,
              now: 0
            }
          ])
        }
        yield* sql`UPDATE outbox SET status = 'cancelled' WHERE effect_id = 'tool:kept-row'`
        yield* sql`UPDATE outbox SET status = 'running' WHERE effect_id = 'tool:open'`

        yield* ThreadViews.setup
        // Setup is idempotent: a second run (the next boot) changes nothing.
        yield* ThreadViews.setup
        const rows = yield* sql<{ effect_id: string; status: string | null; position: number }>`
        SELECT effect_id, status, position FROM agent_tool_calls ORDER BY effect_id`
        assert.deepStrictEqual(
          rows.map((r) => [r.effect_id, r.status, Number(r.position)]),
          [
            ["tool:kept-row", "cancelled", 0],
            ["tool:late", "succeeded", 0],
            ["tool:open", null, 0],
            ["tool:pruned-ok", "succeeded", 0],
            ["tool:pruned-storage", "failed", 0],
            ["tool:unknown", "failed", 0]
          ]
        )
      }).pipe(Effect.provide(engineWithoutViews()))
  )
})

/** A thread's read model as the projection leaves it, written directly: one thread, its rows as given. */
const threadRows = (
  messages: ReadonlyArray<string>,
  calls: ReadonlyArray<{ readonly effectId: string; readonly arguments: string; readonly deadline: number }>
) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    yield* ThreadViews.setup
    yield* sql`INSERT INTO agent_threads ${sql.insert({ thread_id: "t1", title: null, status: "running", updated_seq: 1 })}`
    for (const [i, message] of messages.entries()) {
      yield* sql`INSERT INTO agent_messages ${sql.insert({ thread_id: "t1", position: i + 1, message })}`
    }
    for (const call of calls) {
      yield* sql`INSERT INTO agent_tool_calls ${sql.insert({
        effect_id: call.effectId,
        thread_id: "t1",
        turn_id: "t1:m1",
        step: 1,
        call_id: call.effectId,
        transcript_id: call.effectId,
        name: "publish",
        arguments: call.arguments,
        approval: "awaiting",
        approval_deadline: call.deadline
      })}`
    }
  })

describe("reads of a thread with one damaged row (cut off, hand-edited)", () => {
  it.effect("the approvals list shows the damaged call with its arguments null and why; the others as stored", () =>
    Effect.gen(function* () {
      yield* threadRows(
        [],
        [
          { effectId: "tool:ok", arguments: '{"x":1}', deadline: 1_000 },
          { effectId: "tool:cut", arguments: '{"x":', deadline: 2_000 }
        ]
      )
      const listed = yield* pendingApprovals({ limit: 10 })
      assert.deepStrictEqual(
        listed.map((a) => [a.callId, a.arguments, a.undecodable === undefined]),
        [
          ["tool:ok", { x: 1 }, true],
          ["tool:cut", null, false]
        ]
      )
      assert.match(listed[1]!.undecodable ?? "", /^its stored argument text is not JSON \(/)
    }).pipe(Effect.provide(engineWithoutViews()))
  )

  it.effect(
    "the transcript and thread views list the readable messages, say which stored position is unreadable and why, and do not validate; the model's read refuses it",
    () =>
      Effect.gen(function* () {
        yield* threadRows(
          [
            JSON.stringify({ role: "user", content: "hi" }),
            '{"role":"assistant","content":"hel',
            JSON.stringify({ role: "user", content: "again" })
          ],
          []
        )
        const transcript = (yield* transcriptView("t1"))!
        assert.deepStrictEqual(transcript.messages, [
          { role: "user", content: "hi" },
          { role: "user", content: "again" }
        ])
        assert.isFalse(transcript.valid)
        assert.deepStrictEqual(
          transcript.unreadableMessages?.map((m) => m.position),
          [2]
        )
        assert.match(transcript.unreadableMessages?.[0]?.why ?? "", /^its stored message is not JSON \(/)
        const thread = (yield* threadView("t1"))!
        assert.strictEqual(thread.messages.length, 2)
        assert.deepStrictEqual(thread.unreadableMessages, transcript.unreadableMessages)
        // A model step is never sent a transcript with a hole in it: the read fails, typed.
        const refused = yield* Effect.flip(transcriptOf("t1"))
        assert.deepStrictEqual(
          refused._tag === "TranscriptUnreadable" ? [refused._tag, refused.position] : [refused._tag],
          ["TranscriptUnreadable", 2]
        )
      }).pipe(Effect.provide(engineWithoutViews()))
  )

  it.effect(
    "a message that is JSON of another shape is unreadable as a cut-off one: listed with why (not the value), never sent",
    () =>
      Effect.gen(function* () {
        const long = "x".repeat(5_000)
        yield* threadRows(
          [
            JSON.stringify({ role: "user", content: "hi" }),
            '{"foo":1}',
            "42",
            JSON.stringify({ role: "system", content: long }),
            JSON.stringify({ role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function" }] }),
            JSON.stringify({ role: "tool", content: long })
          ],
          []
        )
        const transcript = (yield* transcriptView("t1"))!
        assert.deepStrictEqual(transcript.messages, [{ role: "user", content: "hi" }])
        assert.isFalse(transcript.valid)
        const shape = "its stored message does not have the expected shape"
        assert.deepStrictEqual(
          transcript.unreadableMessages?.map((m) => [m.position, m.why]),
          [
            [2, `${shape} (role is missing)`],
            [3, `${shape} (expected an object)`],
            [4, `${shape} (role: expected "user" | "assistant" | "tool")`],
            [5, `${shape} (tool_calls.0.function is missing)`],
            [6, `${shape} (tool_call_id is missing)`]
          ]
        )
        assert.deepStrictEqual((yield* threadView("t1"))!.unreadableMessages, transcript.unreadableMessages)
        const refused = yield* Effect.flip(transcriptOf("t1"))
        assert.deepStrictEqual(
          refused._tag === "TranscriptUnreadable" ? [refused._tag, refused.position] : [refused._tag],
          ["TranscriptUnreadable", 2]
        )
      }).pipe(Effect.provide(engineWithoutViews()))
  )
})
