/**
 * Delegate-and-await through the real engine on SQLite with the scripted provider: the waiting
 * call's result is the awaited turn's final text, a cycle is refused with a result the model reads,
 * and both threads' transcripts validate.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Engine, Outbox, StorageFaults, Timers, driverError } from "@orchestration/engine"
import { Deferred, Effect, Layer } from "effect"
import { ModelProvider } from "../src/Provider.js"
import * as ScriptedProvider from "../src/ScriptedProvider.js"
import { threadView, transcriptView } from "../src/ThreadReadModel.js"
import {
  advanceUntil,
  agentsStack,
  allTurnsTerminal,
  eventually,
  interrupt,
  script,
  send,
  turnStatus
} from "./fixtures/agents.js"

/** The scripted model, except that thread `slow` never answers: its turn stays running. */
const slowProvider = Layer.succeed(ModelProvider, {
  step: (request) => (request.requestId.startsWith("step:slow:") ? Effect.never : ScriptedProvider.make.step(request))
})

const toolResults = (threadId: string) =>
  Effect.map(transcriptView(threadId), (t) =>
    (t?.messages ?? []).filter((m) => m.role === "tool").map((m) => m.content)
  )

describe("delegate with await", () => {
  it.effect("the waiting call's result is the other thread's final text, then the turn completes", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const parent = script(
        { toolCalls: [{ name: "delegate", arguments: { threadId: "helper", text: "summarise docs", await: true } }] },
        { text: "all done" }
      )
      yield* engine.dispatchWithReceipt(send("t1", "m1", parent))
      yield* eventually(allTurnsTerminal("t1", 1), "parent turn done")
      const view = (yield* threadView("t1"))!
      assert.deepStrictEqual(
        view.turns.map((t) => [t.status, t.steps]),
        [["completed", 2]]
      )
      assert.deepStrictEqual(yield* toolResults("t1"), [
        JSON.stringify({ threadId: "helper", status: "completed", text: "echo: summarise docs" })
      ])
      const transcript = (yield* transcriptView("t1"))!
      assert.isTrue(transcript.valid, JSON.stringify(transcript.problems))
      assert.deepStrictEqual(transcript.messages.at(-1), { role: "assistant", content: "all done" })
      const helper = (yield* transcriptView("helper"))!
      assert.isTrue(helper.valid, JSON.stringify(helper.problems))
      assert.deepStrictEqual(
        helper.messages.map((m) => m.content),
        ["summarise docs", "echo: summarise docs"]
      )
      // The delegate's row settled at once; the reply went through its own row, delivered once.
      const delegateRow = yield* Outbox.find("tool:t1:m1:call_1_0")
      assert.strictEqual(delegateRow?.status, "succeeded")
      const rows = yield* Outbox.list({ limit: 50 })
      const replies = rows.filter((r) => r.kind === "delegate.reply")
      assert.deepStrictEqual(
        replies.map((r) => [r.status, (r.response as { delivered?: boolean }).delivered]),
        [["succeeded", true]]
      )
    }).pipe(Effect.provide(agentsStack()))
  )

  it.effect(
    "children may delegate further; a thread awaiting itself through others is refused with a result the model reads",
    () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        // t1 awaits t2; t2 awaits t3 (fine), then awaits t1 (a cycle: t1 → t2 → t1).
        const t2 = script(
          { toolCalls: [{ name: "delegate", arguments: { threadId: "t3", text: "leaf", await: true } }] },
          { toolCalls: [{ name: "delegate", arguments: { threadId: "t1", text: "back", await: true } }] },
          { text: "t2 finished" }
        )
        const t1 = script(
          { toolCalls: [{ name: "delegate", arguments: { threadId: "t2", text: t2, await: true } }] },
          { text: "t1 finished" }
        )
        yield* engine.dispatchWithReceipt(send("t1", "m1", t1))
        yield* eventually(allTurnsTerminal("t1", 1), "t1 done")
        const t2Results = yield* toolResults("t2")
        assert.deepStrictEqual(
          t2Results[0],
          JSON.stringify({ threadId: "t3", status: "completed", text: "echo: leaf" })
        )
        assert.include(String(t2Results[1]), "delegate refused")
        assert.include(String(t2Results[1]), "t1 → t2 → t1")
        assert.deepStrictEqual(yield* toolResults("t1"), [
          JSON.stringify({ threadId: "t2", status: "completed", text: "t2 finished" })
        ])
        // t1 got no message from the refused delegate.
        assert.strictEqual((yield* threadView("t1"))!.turns.length, 1)
        for (const id of ["t1", "t2", "t3"]) {
          const transcript = (yield* transcriptView(id))!
          assert.isTrue(transcript.valid, `${id}: ${JSON.stringify(transcript.problems)}`)
        }
      }).pipe(Effect.provide(agentsStack()))
  )

  it.effect("interrupting the waiting turn interrupts the awaited one", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      // The child runs a command long enough to be interrupted while it runs.
      const child = script({ toolCalls: [{ name: "execute", arguments: { command: "sleep 30" } }] })
      const parent = script({
        toolCalls: [{ name: "delegate", arguments: { threadId: "child", text: child, await: true } }]
      })
      yield* engine.dispatchWithReceipt(send("t1", "m1", parent))
      yield* eventually(
        Effect.map(Outbox.list({ limit: 50 }), (rows) =>
          rows.some((r) => r.kind === "tool.execute" && r.status === "running")
        ),
        "child's command running"
      )
      yield* engine.dispatchWithReceipt({
        commandId: "stop-1",
        type: "turn.interrupt",
        threadId: "t1",
        turnId: "t1:m1"
      })
      yield* eventually(allTurnsTerminal("child", 1), "child interrupted")
      const childView = (yield* threadView("child"))!
      assert.strictEqual(childView.turns[0]!.status, "interrupted")
      assert.include(String(childView.turns[0]!.reason), "the waiting turn t1:m1 of thread 't1' ended")
      const [result] = yield* toolResults("t1")
      assert.include(String(result), "interrupted")
      for (const id of ["t1", "child"]) {
        const transcript = (yield* transcriptView(id))!
        assert.isTrue(transcript.valid, `${id}: ${JSON.stringify(transcript.problems)}`)
      }
    }).pipe(Effect.provide(agentsStack()))
  )

  it.effect(
    "the deadline fires under the TestClock: the call's result says it timed out, the turn goes on, the awaited turn stops",
    () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const parent = script(
          {
            toolCalls: [
              {
                name: "delegate",
                arguments: { threadId: "slow", text: "take your time", await: true, timeoutSeconds: 3 }
              }
            ]
          },
          { text: "gave up waiting" }
        )
        yield* engine.dispatchWithReceipt(send("t1", "m1", parent))
        yield* eventually(
          Effect.map(Timers.ofAggregate("thread", "t1"), (timers) => timers.some((t) => t.status === "pending")),
          "deadline scheduled"
        )
        // While it waits, the call shows as awaiting its answer, with no result.
        const waitingCall = (yield* threadView("t1"))!.turns[0]!.toolCalls[0]!
        assert.deepStrictEqual([waitingCall.status, waitingCall.result], ["awaiting-answer", undefined])
        yield* advanceUntil(allTurnsTerminal("t1", 1), "parent turn done", 10)
        const [result] = yield* toolResults("t1")
        assert.match(String(result), /^error: timed out: thread 'slow' did not answer by /)
        const transcript = (yield* transcriptView("t1"))!
        assert.isTrue(transcript.valid, JSON.stringify(transcript.problems))
        assert.deepStrictEqual(transcript.messages.at(-1), { role: "assistant", content: "gave up waiting" })
        assert.deepStrictEqual(
          (yield* Timers.ofAggregate("thread", "t1")).map((t) => t.status),
          ["fired"]
        )
        // Nobody awaits the other turn now: the deadline withdrew it, so it stops instead of running on.
        yield* eventually(allTurnsTerminal("slow", 1), "slow turn withdrawn")
        assert.deepStrictEqual(
          (yield* turnStatus("slow")).map((t) => t.status),
          ["interrupted"]
        )
      }).pipe(Effect.provide(agentsStack({ provider: slowProvider })))
  )

  it.effect(
    "a deadline whose stored command this build refuses ends the waiting turn failed, naming it, and the awaited turn stops",
    () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const parent = script({
          toolCalls: [
            {
              name: "delegate",
              arguments: { threadId: "slow", text: "take your time", await: true, timeoutSeconds: 3 }
            }
          ]
        })
        yield* engine.dispatchWithReceipt(send("t1", "m1", parent))
        yield* eventually(
          Effect.map(Timers.ofAggregate("thread", "t1"), (timers) => timers.some((t) => t.status === "pending")),
          "deadline scheduled"
        )
        // A deadline command this build refuses (as one written by a build whose timeout had other fields).
        const sql = yield* SqlClient
        yield* sql`UPDATE timers SET command = '{"threadId":"t1","type":"delegate.timeout"}' WHERE aggregate_type = 'thread'`
        yield* advanceUntil(allTurnsTerminal("t1", 1), "waiting turn ended after its deadline could not fire", 10)
        const reason = "the deadline of call 'call_1_0' awaiting thread 'slow' could not fire (invalid-command)"
        assert.deepStrictEqual(yield* turnStatus("t1"), [{ turn_id: "t1:m1", status: "failed", reason }])
        const [result] = yield* toolResults("t1")
        assert.strictEqual(result, `failed: the turn failed before this call finished (${reason})`)
        // The timer loop marks the row failed once its tell is answered: after the turn's end, not before it.
        yield* eventually(
          Effect.map(Timers.ofAggregate("thread", "t1"), (timers) => timers.map((t) => t.status).join() === "failed"),
          "the deadline's timer marked failed"
        )
        const told = (yield* engine.readEvents()).filter((e) => e.type === "turn.timer-failed")
        assert.deepStrictEqual(
          told.map((e) => (e.payload as { wait: string; reason: string }).wait),
          ["delegate"]
        )
        // Nobody awaits the other turn now: it is withdrawn, not left running for no one.
        yield* eventually(allTurnsTerminal("slow", 1), "slow turn withdrawn")
        assert.deepStrictEqual(
          (yield* turnStatus("slow")).map((t) => t.status),
          ["interrupted"]
        )
        for (const id of ["t1", "slow"]) {
          const transcript = (yield* transcriptView(id))!
          assert.isTrue(transcript.valid, `${id}: ${JSON.stringify(transcript.problems)}`)
        }
      }).pipe(
        // Should the test fail with the slow turn still running, its never-ending step is cancelled, so
        // the stack can close and the failure be reported (not a test timeout).
        Effect.onError(() =>
          Effect.flatMap(Engine.Engine, (engine) =>
            engine.dispatchWithReceipt({ commandId: "delete-slow", type: "thread.delete", threadId: "slow" })
          ).pipe(Effect.ignore)
        ),
        Effect.provide(agentsStack({ provider: slowProvider }))
      )
  )

  it.effect(
    "the reply to a waiting call goes before the awaited thread's next turn, so that turn's model step cannot hold it",
    () => {
      // The awaited thread's delegated step waits for a gate; its next message's step never answers.
      const gate = Effect.runSync(Deferred.make<void>())
      const provider = Layer.succeed(ModelProvider, {
        step: (request) =>
          request.requestId.startsWith("step:helper:next")
            ? Effect.never
            : request.requestId.startsWith("step:helper:")
              ? Effect.zipRight(Deferred.await(gate), ScriptedProvider.make.step(request))
              : ScriptedProvider.make.step(request)
      })
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const parent = script(
          { toolCalls: [{ name: "delegate", arguments: { threadId: "helper", text: "summarise", await: true } }] },
          { text: "all done" }
        )
        yield* engine.dispatchWithReceipt(send("t1", "m1", parent))
        yield* eventually(
          Effect.map(turnStatus("helper"), (turns) => turns.some((t) => t.status === "running")),
          "the awaited turn running"
        )
        // A second message for the awaited thread, queued behind the delegated one.
        yield* engine.dispatchWithReceipt(send("helper", "next", "and then this"))
        yield* Deferred.succeed(gate, undefined)
        yield* eventually(allTurnsTerminal("t1", 1), "the waiting turn done while the next turn's step hangs")
        assert.deepStrictEqual(yield* toolResults("t1"), [
          JSON.stringify({ threadId: "helper", status: "completed", text: "echo: summarise" })
        ])
        assert.deepStrictEqual(
          (yield* turnStatus("helper")).map((t) => t.status),
          ["completed", "running"]
        )
        // The hanging step stops, so the stack can close (its shutdown grace waits on the TestClock).
        yield* engine.dispatchWithReceipt(interrupt("helper", "helper:next"))
        yield* eventually(allTurnsTerminal("helper", 2), "the next turn interrupted")
      }).pipe(Effect.provide(agentsStack({ provider })))
    }
  )

  it.effect("a waiting turn's interrupt withdraws the awaited turn before the waiting thread's next turn runs", () => {
    // The awaited thread and the waiting thread's next message never answer.
    const provider = Layer.succeed(ModelProvider, {
      step: (request) =>
        request.requestId.startsWith("step:child:") || request.requestId.startsWith("step:t1:m2")
          ? Effect.never
          : ScriptedProvider.make.step(request)
    })
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const parent = script({
        toolCalls: [{ name: "delegate", arguments: { threadId: "child", text: "work", await: true } }]
      })
      yield* engine.dispatchWithReceipt(send("t1", "m1", parent))
      yield* eventually(
        Effect.map(turnStatus("child"), (turns) => turns.some((t) => t.status === "running")),
        "the awaited turn running"
      )
      yield* engine.dispatchWithReceipt(send("t1", "m2", "next"))
      yield* engine.dispatchWithReceipt(interrupt("t1", "t1:m1"))
      yield* eventually(allTurnsTerminal("child", 1), "the awaited turn withdrawn while t1's next step hangs")
      assert.deepStrictEqual(
        (yield* turnStatus("child")).map((t) => t.status),
        ["interrupted"]
      )
      assert.deepStrictEqual(
        (yield* turnStatus("t1")).map((t) => t.status),
        ["interrupted", "running"]
      )
      // The hanging step stops, so the stack can close (its shutdown grace waits on the TestClock).
      yield* engine.dispatchWithReceipt(interrupt("t1", "t1:m2"))
      yield* eventually(allTurnsTerminal("t1", 2), "t1's next turn interrupted")
    }).pipe(Effect.provide(agentsStack({ provider })))
  })

  it.effect(
    "two turns awaiting each other's thread (a cycle between different turns) end at the first deadline, and both threads go on",
    () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const a = script(
          {
            toolCalls: [
              { name: "delegate", arguments: { threadId: "B", text: "from A", await: true, timeoutSeconds: 3 } }
            ]
          },
          { text: "A gave up on B" }
        )
        const b = script(
          {
            toolCalls: [
              { name: "delegate", arguments: { threadId: "A", text: "from B", await: true, timeoutSeconds: 600 } }
            ]
          },
          { text: "B heard from A" }
        )
        yield* engine.dispatchWithReceipt(send("A", "m1", a))
        yield* engine.dispatchWithReceipt(send("B", "m1", b))
        yield* eventually(
          Effect.map(Timers.ofAggregate("thread", "A"), (timers) => timers.some((t) => t.status === "pending")),
          "A's deadline scheduled"
        )
        yield* advanceUntil(
          Effect.zipWith(allTurnsTerminal("A", 2), allTurnsTerminal("B", 2), (x, y) => x && y),
          "both threads done",
          20
        )
        const [aResult] = yield* toolResults("A")
        assert.match(String(aResult), /^error: timed out: thread 'B' did not answer by /)
        assert.deepStrictEqual(yield* toolResults("B"), [
          JSON.stringify({ threadId: "A", status: "completed", text: "echo: from B" })
        ])
        // A's message to B was withdrawn when A's deadline fired: it never ran.
        assert.deepStrictEqual(
          [(yield* turnStatus("A")).map((t) => t.status), (yield* turnStatus("B")).map((t) => t.status)],
          [
            ["completed", "completed"],
            ["completed", "interrupted"]
          ]
        )
        assert.include(String((yield* turnStatus("B"))[1]!.reason), "waiting for it timed out")
        for (const id of ["A", "B"]) {
          const transcript = (yield* transcriptView(id))!
          assert.isTrue(transcript.valid, `${id}: ${JSON.stringify(transcript.problems)}`)
        }
      }).pipe(Effect.provide(agentsStack()))
  )

  it.effect(
    "a reply the store refused at every try is sent again, so the waiting call gets its answer, not its deadline",
    () => {
      // The store refuses the first reply row's command (its receipt) at every try (on PostgreSQL a try
      // may meet the fault twice: in its batch, then re-run alone).
      let refused = 0
      const faults = Layer.succeed(StorageFaults, {
        before: (point, commandId) =>
          point === "receipts" && commandId.startsWith("delegate:reply:") && !commandId.includes("#resend-")
            ? Effect.suspend(() => {
                refused++
                return Effect.fail(driverError("SQLITE_IOERR_WRITE", "disk I/O error"))
              })
            : Effect.void
      })
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const parent = script(
          {
            toolCalls: [
              {
                name: "delegate",
                arguments: { threadId: "helper", text: "summarise", await: true, timeoutSeconds: 600 }
              }
            ]
          },
          { text: "all done" }
        )
        yield* engine.dispatchWithReceipt(send("t1", "m1", parent))
        yield* advanceUntil(allTurnsTerminal("t1", 1), "the waiting turn done before its deadline", 120)
        assert.isAtLeast(refused, 5)
        assert.deepStrictEqual(yield* toolResults("t1"), [
          JSON.stringify({ threadId: "helper", status: "completed", text: "echo: summarise" })
        ])
        const replies = (yield* Outbox.list({ limit: 50 })).filter((r) => r.kind === "delegate.reply")
        assert.deepStrictEqual(
          replies.map((r) => [r.status, r.attempts]),
          [
            ["failed", 5],
            ["succeeded", 1]
          ]
        )
      }).pipe(Effect.provide(agentsStack().pipe(Layer.provide(faults))))
    }
  )

  it.effect(
    "a withdraw the store refused at every try is sent again, so the awaited turn stops, not runs on for nobody",
    () => {
      // The awaited thread never answers; the store refuses the first withdraw row's command at every
      // try (on PostgreSQL a try may meet the fault twice: in its batch, then re-run alone).
      let refused = 0
      const faults = Layer.succeed(StorageFaults, {
        before: (point, commandId) =>
          point === "receipts" && commandId.startsWith("delegate:withdraw:") && !commandId.includes("#resend-")
            ? Effect.suspend(() => {
                refused++
                return Effect.fail(driverError("SQLITE_IOERR_WRITE", "disk I/O error"))
              })
            : Effect.void
      })
      const provider = Layer.succeed(ModelProvider, {
        step: (request) =>
          request.requestId.startsWith("step:child:") ? Effect.never : ScriptedProvider.make.step(request)
      })
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const parent = script({
          toolCalls: [
            { name: "delegate", arguments: { threadId: "child", text: "work", await: true, timeoutSeconds: 600 } }
          ]
        })
        yield* engine.dispatchWithReceipt(send("t1", "m1", parent))
        yield* eventually(
          Effect.map(turnStatus("child"), (turns) => turns.some((t) => t.status === "running")),
          "the awaited turn running"
        )
        yield* engine.dispatchWithReceipt(interrupt("t1", "t1:m1"))
        yield* advanceUntil(allTurnsTerminal("child", 1), "the awaited turn withdrawn", 120)
        assert.isAtLeast(refused, 5)
        assert.deepStrictEqual(
          (yield* turnStatus("child")).map((t) => t.status),
          ["interrupted"]
        )
        const withdrawRows = Effect.map(Outbox.list({ limit: 50 }), (rows) =>
          rows.filter((r) => r.kind === "delegate.withdraw")
        )
        // The turn ends in the withdraw's command; its row settles just after.
        yield* eventually(
          Effect.map(withdrawRows, (rows) => rows.every((r) => r.status === "succeeded" || r.status === "failed")),
          "the withdraw rows settled"
        )
        const withdraws = yield* withdrawRows
        assert.deepStrictEqual(
          withdraws.map((r) => [r.status, r.attempts]),
          [
            ["failed", 5],
            ["succeeded", 1]
          ]
        )
      }).pipe(Effect.provide(agentsStack({ provider }).pipe(Layer.provide(faults))))
    }
  )
})
