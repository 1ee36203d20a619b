import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Engine, Outbox, Retention } from "@orchestration/engine"
import { TestStore } from "@orchestration/engine/testing"
import { Effect, Layer, TestClock } from "effect"
import { join } from "node:path"
import { ModelProvider, type ModelStepResponse } from "../src/Provider.js"
import { threadView, transcriptView } from "../src/ThreadReadModel.js"
import { World } from "../src/World.js"
import {
  processesWith,
  advanceUntil,
  agentsStack,
  allTurnsTerminal,
  eventually,
  script,
  send,
  tempDir,
  turnStatus,
  waitFor
} from "./fixtures/agents.js"

describe("a turn through the outbox", () => {
  it.effect(
    "publish, execute and delegate: the turn completes, the transcript validates, each tool performed once",
    () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const world = yield* World
        const text = script(
          { toolCalls: [{ name: "publish", arguments: { path: "docs/readme.md", content: "hello" } }] },
          {
            toolCalls: [
              { name: "execute", arguments: { command: "echo tested" } },
              { name: "delegate", arguments: { threadId: "helper", text: "summarise docs/readme.md" } }
            ]
          },
          { text: "all done" }
        )
        const answer = yield* engine.dispatchWithReceipt(send("t1", "m1", text))
        assert.deepStrictEqual(answer.effectIds, ["step:t1:m1#1"])
        yield* waitFor(allTurnsTerminal("t1", 1), "turn done")
        const view = (yield* threadView("t1"))!
        assert.strictEqual(view.status, "idle")
        assert.deepStrictEqual(
          view.turns.map((t) => [t.status, t.steps]),
          [["completed", 3]]
        )
        assert.deepStrictEqual(
          view.turns[0]!.toolCalls.map((c) => [c.name, c.status, c.effectId]),
          [
            ["publish", "succeeded", "tool:t1:m1:call_1_0"],
            ["execute", "succeeded", "tool:t1:m1:call_2_0"],
            ["delegate", "succeeded", "tool:t1:m1:call_2_1"]
          ]
        )
        const transcript = (yield* transcriptView("t1"))!
        assert.isTrue(transcript.valid, JSON.stringify(transcript.problems))
        assert.deepStrictEqual(
          transcript.messages.map((m) => m.role),
          ["user", "assistant", "tool", "assistant", "tool", "tool", "assistant"]
        )
        assert.deepStrictEqual(transcript.messages.at(-1), { role: "assistant", content: "all done" })
        // The delegate's thread ran its own turn (an echo).
        yield* eventually(allTurnsTerminal("helper", 1), "delegated turn done")
        const helper = (yield* transcriptView("helper"))!
        assert.deepStrictEqual(
          helper.messages.map((m) => m.content),
          ["summarise docs/readme.md", "echo: summarise docs/readme.md"]
        )
        const ledger = yield* world.readLedger
        const tools = ledger.filter((l) => l.kind.startsWith("tool."))
        assert.deepStrictEqual(tools.map((l) => l.kind).sort(), ["tool.delegate", "tool.execute", "tool.publish"])
        assert.deepStrictEqual((yield* world.readVersions("docs/readme.md")).length, 1)
        assert.deepStrictEqual(
          (yield* world.readExecutions).map((e) => e.command),
          ["echo tested"]
        )
      }).pipe(Effect.provide(agentsStack()))
  )

  it.effect("a queued message starts its turn after the current one, and enters the transcript only then", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(
        send("t1", "m1", script({ toolCalls: [{ name: "execute", arguments: { command: "sleep 2" } }] }))
      )
      yield* eventually(
        Effect.map(Outbox.find("tool:t1:m1:call_1_0"), (r) => r?.status === "running"),
        "execute running"
      )
      yield* engine.dispatchWithReceipt(send("t1", "m2", "second"))
      assert.deepStrictEqual(
        (yield* turnStatus("t1")).map((t) => t.status),
        ["running", "queued"]
      )
      // While the call is open, the queued message is not in the transcript.
      const during = (yield* transcriptView("t1"))!.messages
      assert.deepStrictEqual(
        during.map((m) => m.role),
        ["user", "assistant"]
      )
      yield* waitFor(allTurnsTerminal("t1", 2), "both turns done")
      const transcript = (yield* transcriptView("t1"))!
      assert.isTrue(transcript.valid)
      const ran = JSON.parse(String(transcript.messages[2]!.content))
      assert.deepStrictEqual([ran.exitCode, ran.stdout, ran.truncated], [0, "", false])
      assert.isAtLeast(ran.durationMs, 1_900)
      assert.deepStrictEqual(
        transcript.messages.map((m) => [m.role, m.content]),
        [
          ["user", transcript.messages[0]!.content],
          ["assistant", null],
          ["tool", transcript.messages[2]!.content],
          ["assistant", "done"],
          ["user", "second"],
          ["assistant", "echo: second"]
        ]
      )
    }).pipe(Effect.provide(agentsStack()))
  )

  it.effect(
    "interrupt mid-turn: pending effects are cancelled, the call gets a synthetic result, a late result never reaches the transcript",
    () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(
          send(
            "t1",
            "m1",
            script({
              toolCalls: [
                { name: "execute", arguments: { command: "sleep 6131" } },
                { name: "publish", arguments: { path: "after.md", content: "never" } }
              ]
            })
          )
        )
        yield* eventually(
          Effect.map(Outbox.find("tool:t1:m1:call_1_0"), (r) => r?.status === "running"),
          "execute running"
        )
        yield* engine.dispatchWithReceipt(send("t1", "m2", "follow-up"))
        yield* engine.dispatchWithReceipt({
          commandId: "stop-1",
          type: "turn.interrupt",
          threadId: "t1",
          turnId: "t1:m1"
        })
        const turns = yield* turnStatus("t1")
        assert.deepStrictEqual(
          turns.map((t) => [t.status, t.reason]),
          [
            ["interrupted", "interrupted by the user"],
            ["running", null]
          ]
        )
        // The publish never ran: it was pending behind execute in the thread's lane.
        assert.strictEqual((yield* Outbox.find("tool:t1:m1:call_1_1"))!.status, "cancelled")
        // The running execute is stopped: its row is cancelled, and once its process is gone its
        // performer says so, with when it started and how long it ran.
        assert.strictEqual((yield* Outbox.find("tool:t1:m1:call_1_0"))!.status, "cancelled")
        yield* waitFor(
          Effect.map(Outbox.find("tool:t1:m1:call_1_0"), (r) => r?.leaseOwner === null),
          "running execute stopped"
        )
        const stopped = (yield* Outbox.find("tool:t1:m1:call_1_0"))!
        assert.strictEqual((stopped.error as { code?: string }).code, "stopped-after-start")
        assert.deepStrictEqual(processesWith("sleep", "6131"), [])
        yield* waitFor(allTurnsTerminal("t1", 2), "follow-up done")
        const transcript = (yield* transcriptView("t1"))!
        assert.isTrue(transcript.valid, JSON.stringify(transcript.problems))
        const toolMessages = transcript.messages.filter((m) => m.role === "tool")
        assert.strictEqual(toolMessages.length, 2)
        assert.isTrue(toolMessages.every((m) => String(m.content).startsWith("interrupted:")))
        assert.include(
          String(toolMessages[0]!.content),
          'the command "sleep 6131", if it had started, was stopped (its processes are ended) and may have partly run'
        )
        const sql = yield* SqlClient
        const late = yield* sql<{
          late_status: string | null
          status: string
        }>`SELECT late_status, status FROM agent_tool_calls WHERE effect_id = 'tool:t1:m1:call_1_0'`
        assert.deepStrictEqual([late[0]!.late_status, late[0]!.status], [null, "cancelled"])
        // A replayed interrupt finds its receipt; an interrupt of a finished turn changes nothing.
        assert.strictEqual(
          (yield* engine.dispatchWithReceipt({
            commandId: "stop-1",
            type: "turn.interrupt",
            threadId: "t1",
            turnId: "t1:m1"
          })).duplicate,
          true
        )
        assert.deepStrictEqual(
          (yield* engine.dispatchWithReceipt({
            commandId: "stop-2",
            type: "turn.interrupt",
            threadId: "t1",
            turnId: "t1:m1"
          })).events,
          []
        )
      }).pipe(Effect.provide(agentsStack()))
  )

  it.effect("the step limit fails the turn with a clear reason; the transcript stays valid", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const step = { toolCalls: [{ name: "publish", arguments: { path: "loop.md", content: "again" } }] }
      yield* engine.dispatchWithReceipt(send("t1", "m1", script(step, step, step, step)))
      yield* eventually(allTurnsTerminal("t1", 1), "turn ended")
      assert.deepStrictEqual(
        (yield* turnStatus("t1")).map((t) => [t.status, t.reason]),
        [["failed", "step limit of 3 model steps reached"]]
      )
      const transcript = (yield* transcriptView("t1"))!
      assert.isTrue(transcript.valid, JSON.stringify(transcript.problems))
      assert.strictEqual(transcript.messages.filter((m) => m.role === "assistant").length, 3)
    }).pipe(Effect.provide(agentsStack({ stepLimit: 3 })))
  )

  it.effect("an unknown tool becomes an error result the model sees, not a crash", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(
        send("t1", "m1", script({ toolCalls: [{ name: "teleport", arguments: {} }] }, { text: "ok then" }))
      )
      yield* eventually(allTurnsTerminal("t1", 1), "turn done")
      const view = (yield* threadView("t1"))!
      assert.deepStrictEqual(
        view.turns.map((t) => t.status),
        ["completed"]
      )
      assert.deepStrictEqual(
        view.turns[0]!.toolCalls.map((c) => [c.name, c.status, c.result]),
        [["teleport", "failed", "error: unknown tool 'teleport'"]]
      )
      assert.isTrue((yield* transcriptView("t1"))!.valid)
    }).pipe(Effect.provide(agentsStack()))
  )

  it.effect("a deleted thread rejects new messages and runs its cleanup as an effect", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(send("t1", "m1", "hello"))
      yield* eventually(allTurnsTerminal("t1", 1), "turn done")
      yield* engine.dispatchWithReceipt({ commandId: "del-1", type: "thread.delete", threadId: "t1" })
      const refused = yield* Effect.flip(engine.dispatchWithReceipt(send("t1", "m2", "again")))
      assert.strictEqual(refused._tag, "CommandRejected")
      yield* eventually(
        Effect.map(Outbox.find("cleanup:t1"), (r) => r?.status === "succeeded"),
        "cleanup ran"
      )
      assert.strictEqual((yield* threadView("t1"))!.status, "deleted")
    }).pipe(Effect.provide(agentsStack()))
  )

  it.effect(
    "a provider that reuses a tool-call id, within a step and across steps, still gets a completed turn and a valid transcript",
    () => {
      // Answers the n-th step of the turn (counted as in the scripted provider) with fixed responses.
      const publish = (id: string, path: string) => ({ id, name: "publish", arguments: { path, content: path } })
      const steps: ReadonlyArray<ModelStepResponse> = [
        { text: "", toolCalls: [publish("dup", "a.md"), publish("dup", "b.md")] },
        { text: "", toolCalls: [publish("dup", "c.md")] },
        { text: "all three published", toolCalls: [] }
      ]
      const provider = Layer.succeed(ModelProvider, {
        step: (request) => {
          const user = request.transcript.map((m) => m.role).lastIndexOf("user")
          const step = request.transcript.slice(user + 1).filter((m) => m.role === "assistant").length
          return Effect.succeed(steps[step] ?? { text: "done", toolCalls: [] })
        }
      })
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const world = yield* World
        yield* engine.dispatchWithReceipt(send("t1", "m1", "publish three files"))
        yield* advanceUntil(allTurnsTerminal("t1", 1), "turn done")
        const view = (yield* threadView("t1"))!
        assert.deepStrictEqual(
          view.turns.map((t) => [t.status, t.reason, t.steps]),
          [["completed", undefined, 3]]
        )
        const calls = view.turns[0]!.toolCalls
        assert.deepStrictEqual(
          calls.map((c) => [c.callId, c.status]),
          [
            ["dup", "succeeded"],
            ["dup", "succeeded"],
            ["dup", "succeeded"]
          ]
        )
        // Each call has its own transcript id, and its effect id is built from it.
        assert.deepStrictEqual(
          calls.map((c) => [c.transcriptId, c.effectId]),
          [
            ["dup", "tool:t1:m1:dup"],
            ["dup_t1", "tool:t1:m1:dup_t1"],
            ["dup_t1_2", "tool:t1:m1:dup_t1_2"]
          ]
        )
        const transcript = (yield* transcriptView("t1"))!
        assert.isTrue(transcript.valid, JSON.stringify(transcript.problems))
        assert.deepStrictEqual(transcript.messages.at(-1), { role: "assistant", content: "all three published" })
        for (const path of ["a.md", "b.md", "c.md"])
          assert.strictEqual((yield* world.readVersions(path)).length, 1, path)
      }).pipe(Effect.provide(agentsStack({ provider })))
    }
  )

  it.effect(
    "after retention deletes the settled effect rows, the thread view still shows each call's real status; unsettled rows show their live status",
    () => {
      const dir = tempDir()
      const statuses = Effect.map(threadView("t1"), (view) =>
        view!.turns[0]!.toolCalls.map((c) => [c.callId, c.status])
      )
      const settled = [
        ["call_1_0", "succeeded"],
        ["call_1_1", "failed"],
        ["call_2_0", "cancelled"],
        ["call_2_1", "cancelled"]
      ]
      const turn = Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(
          send(
            "t1",
            "m1",
            script(
              {
                toolCalls: [
                  { name: "publish", arguments: { path: "ok.md", content: "ok" } },
                  { name: "publish", arguments: { path: "../escape.md", content: "no" } }
                ]
              },
              {
                toolCalls: [
                  { name: "execute", arguments: { command: "sleep 6132" } },
                  { name: "publish", arguments: { path: "after.md", content: "never" } }
                ]
              }
            )
          )
        )
        yield* eventually(
          Effect.map(Outbox.find("tool:t1:m1:call_2_0"), (r) => r?.status === "running"),
          "execute running"
        )
        // While rows are unsettled the view shows them live: the publish waits behind execute in the lane.
        assert.deepStrictEqual(yield* statuses, [
          ["call_1_0", "succeeded"],
          ["call_1_1", "failed"],
          ["call_2_0", "running"],
          ["call_2_1", "pending"]
        ])
        yield* engine.dispatchWithReceipt({
          commandId: "stop-1",
          type: "turn.interrupt",
          threadId: "t1",
          turnId: "t1:m1"
        })
        // The interrupt cancels the pending publish and stops the running execute.
        assert.deepStrictEqual(yield* statuses, settled)
        yield* waitFor(
          Effect.map(Outbox.find("tool:t1:m1:call_2_0"), (r) => r?.leaseOwner === null),
          "running execute stopped"
        )
        assert.deepStrictEqual(processesWith("sleep", "6132"), [])
        assert.deepStrictEqual(yield* statuses, settled)
      }).pipe(Effect.provide(agentsStack({ dir })))
      // The store again, without the engine's periodic work, so the clock can jump a week at once.
      const retention = Effect.gen(function* () {
        // Past the default retention of settled rows (7 days), the outbox forgets them.
        yield* TestClock.adjust("8 days")
        yield* Retention.pruneOnce()
        for (const id of ["call_1_0", "call_1_1", "call_2_0", "call_2_1"])
          assert.isUndefined(yield* Outbox.find(`tool:t1:m1:${id}`), id)
        assert.deepStrictEqual(yield* statuses, settled)
        // What the model was told stays beside it: both calls of the interrupted step read "interrupted".
        const view = (yield* threadView("t1"))!
        assert.deepStrictEqual(
          view.turns[0]!.toolCalls.map((c) => c.outcome),
          ["succeeded", "failed", "interrupted", "interrupted"]
        )
      }).pipe(Effect.provide(TestStore.layer({ filename: join(dir, "engine.db") })))
      return Effect.zipRight(turn, retention)
    }
  )
})
