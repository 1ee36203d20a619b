/**
 * Approval end to end, through the real engine (SQLite; PostgreSQL in the conformance run): a scripted turn asks for `execute`, which
 * waits for an operator with no effect row; approved, the command runs in the real sandbox and the
 * turn completes; denied, or left unanswered past its deadline (TestClock), the model reads why
 * and the turn completes without the command ever running. A restart in between changes nothing. An
 * approved call whose stored request is damaged fails unperformed, and the turn goes on.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Engine, EventLog, Outbox, Timers } from "@orchestration/engine"
import { Effect, Layer, TestClock } from "effect"
import { join } from "node:path"
import * as Approval from "../src/Approval.js"
import { pendingApprovals, threadView, transcriptView } from "../src/ThreadReadModel.js"
import { World } from "../src/World.js"
import { callsOf, fixtureConfig, mcpConfig } from "./fixtures/mcp.js"
import {
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

const HOUR = 3_600_000
const policy = Approval.required(24 * HOUR)
const execute = (command: string) => ({ name: "execute", arguments: { command } })
const callId = "call_1_0"
const effectId = `tool:t1:m1:${callId}`

const awaitingApproval = Effect.map(turnStatus("t1"), (turns) => turns[0]?.status === "awaiting-approval")

const outboxRowsOf = (id: string) =>
  Effect.flatMap(SqlClient, (sql) => sql<{ n: number }>`SELECT COUNT(*) AS n FROM outbox WHERE effect_id = ${id}`).pipe(
    Effect.map((rows) => Number(rows[0]?.n ?? 0))
  )

const toolMessages = Effect.map(transcriptView("t1"), (view) =>
  view!.messages.filter((m) => m.role === "tool").map((m) => String(m.content))
)

const approve = (commandId: string, note?: string) => ({
  commandId,
  type: "tool.approve",
  threadId: "t1",
  callId,
  ...(note === undefined ? {} : { note })
})
const deny = (commandId: string, reason?: string) => ({
  commandId,
  type: "tool.deny",
  threadId: "t1",
  callId,
  ...(reason === undefined ? {} : { reason })
})

describe("approval of a tool call, end to end on SQLite", () => {
  it.effect(
    "execute waits with no effect row; approved (twice: one approval), it runs once in the sandbox and the turn completes; a deny after is a conflict",
    () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const world = yield* World
        yield* engine.dispatchWithReceipt(
          send("t1", "m1", script({ toolCalls: [execute("echo approved > f && cat f")] }, { text: "done" }))
        )
        yield* waitFor(awaitingApproval, "turn awaiting approval")
        // Nothing to perform exists until the operator says so.
        assert.strictEqual(yield* outboxRowsOf(effectId), 0)
        const pending = yield* pendingApprovals({ limit: 10 })
        assert.deepStrictEqual(
          pending.map((p) => [p.threadId, p.callId, p.name, p.arguments]),
          [["t1", callId, "execute", { command: "echo approved > f && cat f" }]]
        )
        const view = (yield* threadView("t1"))!
        assert.deepStrictEqual(
          view.turns[0]!.toolCalls.map((c) => [c.status, c.approval?.status]),
          [["awaiting-approval", "awaiting"]]
        )
        const timers = yield* Timers.ofAggregate("thread", "t1")
        assert.deepStrictEqual(
          timers.map((t) => [t.timerId, t.status]),
          [[`wait.approval.${callId}`, "pending"]]
        )

        const [deadline] = yield* Timers.ofAggregate("thread", "t1")
        const first = yield* engine.dispatchWithReceipt(approve("approve-1", "ok to run"))
        assert.deepStrictEqual(first.effectIds, [effectId])
        const second = yield* engine.dispatchWithReceipt(approve("approve-2"))
        assert.deepStrictEqual([second.events.length, second.effectIds], [0, []])

        yield* waitFor(allTurnsTerminal("t1", 1), "turn done", 60_000)
        const done = (yield* threadView("t1"))!
        assert.strictEqual(done.turns[0]!.status, "completed")
        assert.deepStrictEqual(
          done.turns[0]!.toolCalls.map((c) => [c.status, c.approval?.status, c.approval?.note]),
          [["succeeded", "approved", "ok to run"]]
        )
        const [result] = yield* toolMessages
        assert.deepStrictEqual(JSON.parse(result!).stdout, "approved\n")
        assert.strictEqual((yield* world.readExecutions).length, 1)
        assert.isTrue((yield* transcriptView("t1"))!.valid)
        assert.deepStrictEqual(
          (yield* Timers.ofAggregate("thread", "t1")).map((t) => t.status),
          ["cancelled"]
        )
        assert.deepStrictEqual(yield* pendingApprovals({ limit: 10 }), [])

        // A deadline fire that was already on its way when the approve landed loses: a stored rejection.
        const fire = { ...deadline!.command, commandId: Timers.fireId(deadline!) }
        const lost = yield* Effect.flip(engine.dispatchWithReceipt(fire, { origin: "internal" }))
        assert.deepStrictEqual(
          [lost._tag, lost._tag === "CommandRejected" ? lost.reason : undefined],
          ["CommandRejected", "wait-closed"]
        )
        const lostAgain = yield* Effect.flip(engine.dispatchWithReceipt(fire, { origin: "internal" }))
        assert.strictEqual(lostAgain._tag === "CommandRejected" && lostAgain.duplicate, true)
        assert.strictEqual((yield* world.readExecutions).length, 1)

        const conflict = yield* Effect.flip(engine.dispatchWithReceipt(deny("deny-late")))
        assert.deepStrictEqual(
          [conflict._tag, conflict._tag === "CommandRejected" ? conflict.reason : undefined],
          ["CommandRejected", "approval-conflict"]
        )
        // The rejection is stored: the same command again is answered from its receipt.
        const replayed = yield* Effect.flip(engine.dispatchWithReceipt(deny("deny-late")))
        assert.deepStrictEqual(
          [replayed._tag, replayed._tag === "CommandRejected" ? replayed.duplicate : undefined],
          ["CommandRejected", true]
        )
      }).pipe(Effect.provide(agentsStack({ approval: policy })))
  )

  it.effect("denied with a reason, the command never runs, the model reads why and the turn completes", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const world = yield* World
      yield* engine.dispatchWithReceipt(
        send("t1", "m1", script({ toolCalls: [execute("echo denied > f")] }, { text: "understood" }))
      )
      yield* waitFor(awaitingApproval, "turn awaiting approval")
      yield* engine.dispatchWithReceipt(deny("deny-1", "not on production"))
      yield* waitFor(allTurnsTerminal("t1", 1), "turn done")
      const view = (yield* threadView("t1"))!
      assert.strictEqual(view.turns[0]!.status, "completed")
      assert.deepStrictEqual(
        view.turns[0]!.toolCalls.map((c) => [c.status, c.outcome, c.approval?.status]),
        [["denied", "denied", "denied"]]
      )
      assert.deepStrictEqual(yield* toolMessages, [
        "denied by the operator: not on production; the call was not performed"
      ])
      assert.strictEqual(yield* outboxRowsOf(effectId), 0)
      assert.strictEqual((yield* world.readExecutions).length, 0)
      assert.isTrue((yield* transcriptView("t1"))!.valid)
      const late = yield* Effect.flip(engine.dispatchWithReceipt(approve("approve-late")))
      assert.strictEqual(late._tag === "CommandRejected" ? late.reason : late._tag, "approval-conflict")
    }).pipe(Effect.provide(agentsStack({ approval: policy })))
  )

  it.effect(
    "unanswered, the deadline fires at its time (TestClock) and not before: the call is denied naming the configured duration",
    () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const world = yield* World
        yield* engine.dispatchWithReceipt(
          send("t1", "m1", script({ toolCalls: [execute("echo late > f")] }, { text: "gave up" }))
        )
        yield* eventually(awaitingApproval, "turn awaiting approval")
        const [timer] = yield* Timers.ofAggregate("thread", "t1")
        // One second short of the deadline: still waiting.
        yield* TestClock.adjust(`${2 * 60 - 1} seconds`)
        yield* eventually(Effect.succeed(true), "settle", 200)
        assert.isTrue(yield* awaitingApproval)
        assert.deepStrictEqual(yield* toolMessages, [])
        yield* advanceUntil(allTurnsTerminal("t1", 1), "turn done after the deadline", 30)
        // Decided at its deadline: the expiry's time is the timer's due time, give or take the clock's 1 s steps.
        const events = yield* EventLog.forAggregate("thread", "t1")
        const expired = events.find(
          (e) => e.type === "approval.closed" && (e.payload as { verdict: string }).verdict === "expired"
        )
        assert.isDefined(expired)
        assert.isAtLeast(expired!.occurredAt, timer!.dueAt)
        assert.isBelow(expired!.occurredAt, timer!.dueAt + 2_000)
        assert.strictEqual(expired!.commandId.startsWith("timer:thread:t1:wait.approval.call_1_0#"), true)
        assert.deepStrictEqual(yield* toolMessages, ["denied: no approval within 2 min; the call was not performed"])
        const view = (yield* threadView("t1"))!
        assert.deepStrictEqual(
          [view.turns[0]!.status, view.turns[0]!.toolCalls[0]!.approval?.status],
          ["completed", "expired"]
        )
        assert.strictEqual((yield* world.readExecutions).length, 0)
        // The approve that lost the race is a stored rejection.
        const late = yield* Effect.flip(engine.dispatchWithReceipt(approve("approve-late")))
        assert.strictEqual(late._tag === "CommandRejected" ? late.reason : late._tag, "approval-conflict")
      }).pipe(Effect.provide(agentsStack({ approval: Approval.required(2 * 60_000) })))
  )

  it.effect(
    "a deadline whose stored command this build refuses ends the turn failed, with the timer's failure on record",
    () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const world = yield* World
        yield* engine.dispatchWithReceipt(send("t1", "m1", script({ toolCalls: [execute("echo x")] }, { text: "-" })))
        yield* eventually(awaitingApproval, "turn awaiting approval")
        // A deadline command this build refuses (as one written by a build whose timeout had other fields).
        const sql = yield* SqlClient
        yield* sql`UPDATE timers SET command = '{"threadId":"t1","type":"tool.approval-timeout"}' WHERE aggregate_type = 'thread'`
        // Past the deadline the turn does not wait on in silence: it ends failed, naming the timer's failure.
        yield* TestClock.adjust(`${2 * 60 - 1} seconds`)
        yield* advanceUntil(allTurnsTerminal("t1", 1), "turn ended after its deadline could not fire", 30)
        const reason = "the deadline of call 'call_1_0' awaiting approval could not fire (invalid-command)"
        assert.deepStrictEqual(yield* turnStatus("t1"), [{ turn_id: "t1:m1", status: "failed", reason }])
        const events = yield* EventLog.forAggregate("thread", "t1")
        assert.deepStrictEqual(
          events
            .filter((e) => e.type === "turn.timer-failed")
            .map((e) => {
              const p = e.payload as { wait: string; transcriptId: string; reason: string }
              return [p.wait, p.transcriptId, p.reason]
            }),
          [["approval", callId, "invalid-command"]]
        )
        // The timer loop marks the row failed once its tell is answered: after the turn's end, not before it.
        yield* waitFor(
          Effect.map(Timers.ofAggregate("thread", "t1"), (timers) => timers.map((t) => t.status).join() === "failed"),
          "the deadline's timer marked failed"
        )
        const view = (yield* threadView("t1"))!
        assert.strictEqual(view.turns[0]!.toolCalls[0]!.approval?.status, "cancelled")
        assert.deepStrictEqual(yield* pendingApprovals({ limit: 10 }), [])
        // The call never ran, and a late approve is a conflict, not a run.
        const late = yield* Effect.flip(engine.dispatchWithReceipt(approve("approve-late")))
        assert.strictEqual(late._tag === "CommandRejected" ? late.reason : late._tag, "approval-conflict")
        assert.strictEqual((yield* world.readExecutions).length, 0)
        assert.isTrue((yield* transcriptView("t1"))!.valid)
      }).pipe(Effect.provide(agentsStack({ approval: Approval.required(2 * 60_000) })))
  )

  it.effect("an interrupted turn cancels its open approval and the deadline timer; nothing runs", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const world = yield* World
      yield* engine.dispatchWithReceipt(send("t1", "m1", script({ toolCalls: [execute("echo x")] }, { text: "-" })))
      yield* waitFor(awaitingApproval, "turn awaiting approval")
      yield* engine.dispatchWithReceipt({
        commandId: "stop-1",
        type: "turn.interrupt",
        threadId: "t1",
        turnId: "t1:m1"
      })
      yield* waitFor(allTurnsTerminal("t1", 1), "turn interrupted")
      assert.strictEqual((yield* turnStatus("t1"))[0]!.status, "interrupted")
      assert.deepStrictEqual(
        (yield* Timers.ofAggregate("thread", "t1")).map((t) => t.status),
        ["cancelled"]
      )
      assert.deepStrictEqual(yield* pendingApprovals({ limit: 10 }), [])
      const late = yield* Effect.flip(engine.dispatchWithReceipt(approve("approve-late")))
      assert.strictEqual(late._tag === "CommandRejected" ? late.reason : late._tag, "approval-conflict")
      assert.strictEqual((yield* world.readExecutions).length, 0)
      assert.isTrue((yield* transcriptView("t1"))!.valid)
    }).pipe(Effect.provide(agentsStack({ approval: policy })))
  )

  it.effect("a turn awaiting approval survives a restart of the stack and completes when approved after it", () => {
    const dir = tempDir()
    const stack = () => agentsStack({ dir, approval: policy })
    return Effect.gen(function* () {
      yield* Effect.scoped(
        Effect.gen(function* () {
          const engine = yield* Engine.Engine
          yield* engine.dispatchWithReceipt(
            send("t1", "m1", script({ toolCalls: [execute("echo after-restart")] }, { text: "done" }))
          )
          yield* waitFor(awaitingApproval, "turn awaiting approval")
        }).pipe(Effect.provide(Layer.fresh(stack())))
      )
      yield* Effect.scoped(
        Effect.gen(function* () {
          const engine = yield* Engine.Engine
          const world = yield* World
          assert.isTrue(yield* awaitingApproval)
          assert.deepStrictEqual(
            (yield* pendingApprovals({ threadId: "t1", limit: 10 })).map((p) => p.callId),
            [callId]
          )
          yield* engine.dispatchWithReceipt(approve("approve-1"))
          yield* waitFor(allTurnsTerminal("t1", 1), "turn done after restart")
          assert.strictEqual((yield* turnStatus("t1"))[0]!.status, "completed")
          assert.strictEqual((yield* world.readExecutions).length, 1)
          assert.strictEqual(JSON.parse((yield* toolMessages)[0]!).stdout, "after-restart\n")
        }).pipe(Effect.provide(Layer.fresh(stack())))
      )
    })
  })

  it.effect(
    "an approved delegate whose stored request lost its payload is written as stored and fails unperformed; the model reads why and the turn completes",
    () => {
      const dir = tempDir()
      const stack = () =>
        agentsStack({ dir, approval: { mode: "required", tools: ["delegate"], timeoutMs: 24 * HOUR } })
      return Effect.gen(function* () {
        yield* Effect.scoped(
          Effect.gen(function* () {
            const engine = yield* Engine.Engine
            const delegate = { name: "delegate", arguments: { threadId: "helper", text: "summarise", await: true } }
            yield* engine.dispatchWithReceipt(send("t1", "m1", script({ toolCalls: [delegate] }, { text: "done" })))
            yield* waitFor(awaitingApproval, "turn awaiting approval")
            // The stored request's payload damaged, as a hand edit or a bad migration would leave it.
            const sql = yield* SqlClient
            const [stored] = yield* sql<{ event_id: string; payload: string }>`
              SELECT event_id, payload FROM events WHERE aggregate_id = 't1' AND type = 'approval.requested'`
            const event = JSON.parse(stored!.payload) as { effect: { payload: unknown } }
            const damaged = JSON.stringify({ ...event, effect: { ...event.effect, payload: null } })
            yield* sql`UPDATE events SET payload = ${damaged} WHERE event_id = ${stored!.event_id}`
          }).pipe(Effect.provide(Layer.fresh(stack())))
        )
        // After a restart the thread's state is read back from its stored events, damage included.
        yield* Effect.scoped(
          Effect.gen(function* () {
            const engine = yield* Engine.Engine
            const approved = yield* engine.dispatchWithReceipt(approve("approve-1"))
            assert.deepStrictEqual(approved.effectIds, [effectId])
            yield* waitFor(allTurnsTerminal("t1", 1), "turn done")
            assert.strictEqual((yield* turnStatus("t1"))[0]!.status, "completed")
            const row = (yield* Outbox.find(effectId))!
            assert.deepStrictEqual(
              [row.status, (row.error as { code?: string } | null)?.code, row.attempts],
              ["failed", "payload-undecodable", 1]
            )
            assert.deepStrictEqual(yield* toolMessages, [
              "error: not performed: its stored tool.delegate payload does not have the expected shape (expected an object)"
            ])
            assert.deepStrictEqual(yield* turnStatus("helper"), [], "nothing was delegated")
            assert.isTrue((yield* transcriptView("t1"))!.valid)
          }).pipe(Effect.provide(Layer.fresh(stack())))
        )
      })
    }
  )

  it.live(
    "with a real MCP server: the read-only tool runs at once, the process-bound one waits and runs once approved",
    () => {
      const dir = tempDir("agents-mcp-approval-")
      const log = join(dir, "fixture.jsonl")
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(
          send(
            "t1",
            "m1",
            script(
              {
                toolCalls: [
                  { name: "fixture__echo", arguments: { text: "hi" } },
                  { name: "fixture__slow_write", arguments: { label: "release", sleepMs: 0 } }
                ]
              },
              { text: "done" }
            )
          )
        )
        yield* waitFor(
          Effect.map(pendingApprovals({ limit: 10 }), (p) => p.length === 1 && callsOf(log, "echo") === 1),
          "the write to await approval after the echo ran"
        )
        const [pending] = yield* pendingApprovals({ limit: 10 })
        assert.deepStrictEqual(
          [pending!.callId, pending!.name, pending!.arguments],
          ["call_1_1", "fixture__slow_write", { label: "release", sleepMs: 0 }]
        )
        assert.strictEqual(callsOf(log, "slow_write"), 0)
        yield* engine.dispatchWithReceipt({
          commandId: "approve-w",
          type: "tool.approve",
          threadId: "t1",
          callId: "call_1_1"
        })
        yield* waitFor(allTurnsTerminal("t1", 1), "turn done")
        assert.strictEqual((yield* turnStatus("t1"))[0]!.status, "completed")
        assert.deepStrictEqual([callsOf(log, "echo"), callsOf(log, "slow_write")], [1, 1])
        assert.isTrue((yield* transcriptView("t1"))!.valid)
      }).pipe(Effect.provide(agentsStack({ dir, approval: policy, mcp: mcpConfig({ fixture: fixtureConfig(log) }) })))
    }
  )
})
