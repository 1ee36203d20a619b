/**
 * The turn state machine as a specification: given the thread's events, when a command or an
 * effect's outcome arrives, then these events, effects and cancels (or this rejection). Pure: no
 * store, no engine, no reactor; every branch of `decide` and `onOutcome` in milliseconds.
 */
import { assert, describe, it } from "@effect/vitest"
import type { DecideContext, EffectOutcome } from "@orchestration/engine"
import { makeThread, type CallRecord, type ThreadAggregate, type ThreadEvent } from "../src/Thread.js"
import { foldLetting } from "./fixtures/fold.js"

const ctx: DecideContext = { commandId: "cmd", aggregateId: "t1", now: 0, deriveId: (key) => `cmd:${key}` }

type Command = Parameters<ThreadAggregate["decide"]>[1]

interface Expected {
  readonly events?: ReadonlyArray<ThreadEvent>
  /** Effects as `[id, kind]`. */
  readonly effects?: ReadonlyArray<readonly [string, string]>
  /** Effect ids cancelled in the same transaction. */
  readonly cancel?: ReadonlyArray<string>
}

/** given(events).when(command or outcome).then(decision) | .thenReject(reason), as Emmett's DeciderSpecification. */
const spec = (thread: ThreadAggregate = makeThread()) => ({
  given: (events: ReadonlyArray<ThreadEvent>) => ({
    when: (input: Command | EffectOutcome) => {
      const state = events.reduce(thread.evolve, thread.initialState)
      const answer =
        "status" in input ? thread.onOutcome!(state, input, ctx) : thread.decide(state, input as Command, ctx)
      return {
        thenDecide: (expected: Expected) => {
          if (answer._tag === "Rejection") assert.fail(`rejected: ${answer.reason}: ${answer.message}`)
          assert.deepStrictEqual(answer.events, expected.events ?? [])
          assert.deepStrictEqual(
            answer.effects.map((e) => [e.id, e.kind]),
            (expected.effects ?? []).map(([id, kind]) => [id, kind])
          )
          assert.deepStrictEqual(
            answer.cancel.map((c) => c.effectId),
            expected.cancel ?? []
          )
          // What was decided must fold into the state without surprise.
          answer.events.reduce(thread.evolve, state)
        },
        thenReject: (reason: string) => {
          if (answer._tag !== "Rejection") assert.fail(`accepted with ${answer.events.length} events`)
          assert.strictEqual(answer.reason, reason)
        }
      }
    }
  })
})

const Thread = spec()

// ---- fixtures ---------------------------------------------------------------------------------

const created: ThreadEvent = { type: "thread.created", title: null }
const started = (messageId = "m1", ordinal = 1, text = "go"): ThreadEvent => ({
  type: "turn.started",
  turnId: `t1:${messageId}`,
  ordinal,
  messageId,
  text
})
const queued = (messageId: string): ThreadEvent => ({
  type: "message.queued",
  messageId,
  turnId: `t1:${messageId}`,
  text: "next"
})
const call = (id: string, name = "publish"): CallRecord => ({
  callId: id,
  transcriptId: id,
  effectId: `tool:t1:m1:${id}`,
  name,
  arguments: name === "execute" ? { command: "make" } : { path: `${id}.md`, content: "x" },
  at: 0
})
const responded = (step: number, calls: ReadonlyArray<CallRecord>): ThreadEvent => ({
  type: "model.responded",
  turnId: "t1:m1",
  step,
  text: "",
  toolCalls: calls
})
const result = (c: CallRecord, content: string, outcome: "succeeded" | "failed" = "succeeded"): ThreadEvent => ({
  type: "tool.result",
  turnId: "t1:m1",
  result: { callId: c.callId, transcriptId: c.transcriptId, effectId: c.effectId, content, outcome }
})

const stepOutcome = (
  step: number,
  status: EffectOutcome["status"],
  fields: Partial<EffectOutcome> = {}
): EffectOutcome => ({
  effectId: `step:t1:m1#${step}`,
  kind: "model.step",
  payload: { threadId: "t1", turnId: "t1:m1", step },
  attempt: 1,
  status,
  by: "reactor",
  ...fields
})
const toolOutcome = (
  c: CallRecord,
  status: EffectOutcome["status"],
  fields: Partial<EffectOutcome> = {}
): EffectOutcome => ({
  effectId: c.effectId,
  kind: `tool.${c.name}`,
  payload: { threadId: "t1", turnId: "t1:m1", callId: c.callId },
  attempt: 1,
  status,
  by: "reactor",
  ...fields
})

/** The failure `verdictFor` gives a row whose stored payload is not JSON. */
const undecodable = {
  message: "not performed: its stored payload is not valid JSON",
  code: "payload-undecodable",
  reason: "defect" as const
}

const a = call("a")
const b = call("b")
const running = [created, started()]
const twoCalls = [...running, responded(1, [a, b])]

// ---- decide -----------------------------------------------------------------------------------

describe("Thread spec: commands", () => {
  it("given nothing, when thread.create, then the thread is created", () =>
    Thread.given([])
      .when({ commandId: "c", type: "thread.create", threadId: "t1" })
      .thenDecide({ events: [created] }))

  it("given a thread, when thread.create again, then already-exists", () =>
    Thread.given([created])
      .when({ commandId: "c", type: "thread.create", threadId: "t1" })
      .thenReject("already-exists"))

  it("given nothing, when a message is sent, then the thread is created and its turn starts with step 1", () =>
    Thread.given([])
      .when({ commandId: "c", type: "message.send", threadId: "t1", messageId: "m1", text: "go" })
      .thenDecide({ events: [created, started()], effects: [["step:t1:m1#1", "model.step"]] }))

  it("given a running turn, when another message is sent, then it is queued and nothing runs", () =>
    Thread.given(running)
      .when({ commandId: "c", type: "message.send", threadId: "t1", messageId: "m2", text: "next" })
      .thenDecide({ events: [queued("m2")] }))

  it("given a message, when the same message id is sent again, then duplicate-message", () =>
    Thread.given(running)
      .when({ commandId: "c", type: "message.send", threadId: "t1", messageId: "m1", text: "go" })
      .thenReject("duplicate-message"))

  it("given a deleted thread, when a message is sent, then thread-deleted", () =>
    Thread.given([created, { type: "thread.deleted" }])
      .when({ commandId: "c", type: "message.send", threadId: "t1", messageId: "m1", text: "go" })
      .thenReject("thread-deleted"))

  it("given no running turn, when turn.interrupt, then it is accepted and changes nothing", () =>
    Thread.given([created])
      .when({ commandId: "c", type: "turn.interrupt", threadId: "t1", turnId: "t1:m1" })
      .thenDecide({}))

  it("given a turn with one call answered, when interrupted, then the other gets a synthetic result, step and call are cancelled and the queued message starts", () =>
    Thread.given([...twoCalls, queued("m2"), result(a, "ok")])
      .when({ commandId: "c", type: "turn.interrupt", threadId: "t1", turnId: "t1:m1" })
      .thenDecide({
        events: [
          {
            type: "turn.ended",
            turnId: "t1:m1",
            status: "interrupted",
            reason: "interrupted by the user",
            synthetic: [
              {
                callId: "b",
                transcriptId: "b",
                effectId: b.effectId,
                content: "interrupted: the turn was interrupted before this call finished (interrupted by the user)",
                outcome: "interrupted"
              }
            ]
          },
          started("m2", 2, "next")
        ],
        effects: [["step:t1:m2#1", "model.step"]],
        cancel: ["step:t1:m1#1", b.effectId]
      }))

  it("given no thread, when thread.delete, then not-found", () =>
    Thread.given([]).when({ commandId: "c", type: "thread.delete", threadId: "t1" }).thenReject("not-found"))

  it("given a deleted thread, when thread.delete again, then nothing changes", () =>
    Thread.given([created, { type: "thread.deleted" }])
      .when({ commandId: "c", type: "thread.delete", threadId: "t1" })
      .thenDecide({}))

  it("given an idle thread, when thread.delete, then it is deleted and its cleanup planned", () =>
    Thread.given([created])
      .when({ commandId: "c", type: "thread.delete", threadId: "t1" })
      .thenDecide({ events: [{ type: "thread.deleted" }], effects: [["cleanup:t1", "thread.cleanup"]] }))

  it("given a running turn and a queued message, when thread.delete, then the turn ends, nothing queued starts, and the step is cancelled", () =>
    Thread.given([...running, queued("m2")])
      .when({ commandId: "c", type: "thread.delete", threadId: "t1" })
      .thenDecide({
        events: [
          { type: "turn.ended", turnId: "t1:m1", status: "interrupted", reason: "thread deleted", synthetic: [] },
          { type: "thread.deleted" }
        ],
        effects: [["cleanup:t1", "thread.cleanup"]],
        cancel: ["step:t1:m1#1"]
      }))
})

// ---- onOutcome --------------------------------------------------------------------------------

describe("Thread spec: outcomes of model steps", () => {
  it("given a running turn, when its step answers without tool calls, then the turn completes and the queued message starts", () =>
    Thread.given([...running, queued("m2")])
      .when(stepOutcome(1, "succeeded", { response: { text: "done", toolCalls: [] } }))
      .thenDecide({
        events: [{ type: "turn.completed", turnId: "t1:m1", steps: 1, text: "done" }, started("m2", 2, "next")],
        effects: [["step:t1:m2#1", "model.step"]]
      }))

  it("given a running turn, when its step answers two calls, then they are recorded and one effect each is planned", () =>
    Thread.given(running)
      .when(
        stepOutcome(1, "succeeded", {
          response: { text: "", toolCalls: [a, b].map((c) => ({ id: c.callId, name: c.name, arguments: c.arguments })) }
        })
      )
      .thenDecide({
        events: [responded(1, [a, b])],
        effects: [
          [a.effectId, "tool.publish"],
          [b.effectId, "tool.publish"]
        ]
      }))

  it("given a running turn, when its step calls a known and an unknown tool, then the unknown one is answered at once and only the known one runs", () => {
    const nope = call("n", "nope")
    Thread.given(running)
      .when(
        stepOutcome(1, "succeeded", {
          response: {
            text: "",
            toolCalls: [a, nope].map((c) => ({ id: c.callId, name: c.name, arguments: c.arguments }))
          }
        })
      )
      .thenDecide({
        events: [
          responded(1, [a, nope]),
          {
            type: "tool.result",
            turnId: "t1:m1",
            result: {
              callId: "n",
              transcriptId: "n",
              effectId: nope.effectId,
              content: "error: unknown tool 'nope'",
              outcome: "unknown-tool"
            }
          }
        ],
        effects: [[a.effectId, "tool.publish"]]
      })
  })

  it("given a running turn, when its step calls only unknown tools, then their results are in and the next step starts", () => {
    const nope = call("n", "nope")
    Thread.given(running)
      .when(
        stepOutcome(1, "succeeded", { response: { toolCalls: [{ id: "n", name: "nope", arguments: nope.arguments }] } })
      )
      .thenDecide({
        events: [
          responded(1, [nope]),
          {
            type: "tool.result",
            turnId: "t1:m1",
            result: {
              callId: "n",
              transcriptId: "n",
              effectId: nope.effectId,
              content: "error: unknown tool 'nope'",
              outcome: "unknown-tool"
            }
          }
        ],
        effects: [["step:t1:m1#2", "model.step"]]
      })
  })

  it("given the last allowed step, when it calls only unknown tools, then the turn ends failed at the step limit", () => {
    const nope = call("n", "nope")
    spec(makeThread({ stepLimit: 1 }))
      .given(running)
      .when(
        stepOutcome(1, "succeeded", { response: { toolCalls: [{ id: "n", name: "nope", arguments: nope.arguments }] } })
      )
      .thenDecide({
        events: [
          responded(1, [nope]),
          {
            type: "tool.result",
            turnId: "t1:m1",
            result: {
              callId: "n",
              transcriptId: "n",
              effectId: nope.effectId,
              content: "error: unknown tool 'nope'",
              outcome: "unknown-tool"
            }
          },
          {
            type: "turn.ended",
            turnId: "t1:m1",
            status: "failed",
            reason: "step limit of 1 model steps reached",
            synthetic: []
          }
        ],
        cancel: ["step:t1:m1#1"]
      })
  })

  it("given a running turn, when its step fails, then the turn ends failed and its step is cancelled", () =>
    Thread.given(running)
      .when(stepOutcome(1, "failed", { error: { message: "provider down", reason: "handler" } }))
      .thenDecide({
        events: [
          {
            type: "turn.ended",
            turnId: "t1:m1",
            status: "failed",
            reason: "model step failed: provider down",
            synthetic: []
          }
        ],
        cancel: ["step:t1:m1#1"]
      }))

  it("given a running turn, when its step is cancelled, then the turn ends failed", () =>
    Thread.given(running)
      .when(stepOutcome(1, "cancelled", { error: { message: "cancelled by an operator", reason: "cancelled" } }))
      .thenDecide({
        events: [
          {
            type: "turn.ended",
            turnId: "t1:m1",
            status: "failed",
            reason: "model step failed: cancelled by an operator",
            synthetic: []
          }
        ],
        cancel: ["step:t1:m1#1"]
      }))

  it("given a step that went on, when an old step's outcome arrives, then it is recorded late", () =>
    Thread.given([...twoCalls, result(a, "ok"), result(b, "ok")])
      .when(stepOutcome(1, "succeeded", { response: { text: "again" } }))
      .thenDecide({
        events: [{ type: "effect.late", turnId: "t1:m1", effectId: "step:t1:m1#1", status: "succeeded" }]
      }))

  // A row whose stored payload cannot be read reaches its aggregate with `payload: null` (Outbox.toRow)
  // and fails for good unperformed: the turn is found by the effect id, never by the payload.
  it("given a running turn, when its step's stored payload could not be read, then the turn ends failed with that reason", () =>
    Thread.given(running)
      .when(stepOutcome(1, "failed", { payload: null, error: undecodable }))
      .thenDecide({
        events: [
          {
            type: "turn.ended",
            turnId: "t1:m1",
            status: "failed",
            reason: `model step failed: ${undecodable.message}`,
            synthetic: []
          }
        ],
        cancel: ["step:t1:m1#1"]
      }))

  it("given a running step, when it is retrying or requeued, then the domain waits", () => {
    Thread.given(running)
      .when(stepOutcome(1, "retrying", { error: { message: "again", reason: "handler" } }))
      .thenDecide({})
    Thread.given(running)
      .when(stepOutcome(1, "requeued", { error: { message: "owner gone", reason: "process-lost" } }))
      .thenDecide({})
  })
})

describe("Thread spec: outcomes of tool calls", () => {
  it("given two calls, when the first succeeds, then only its result is recorded", () =>
    Thread.given(twoCalls)
      .when(toolOutcome(a, "succeeded", { response: { ok: true } }))
      .thenDecide({ events: [result(a, '{"ok":true}')] }))

  it("given one call left, when it succeeds, then its result is recorded and the next step starts", () =>
    Thread.given([...twoCalls, result(a, "ok")])
      .when(toolOutcome(b, "succeeded", { response: null }))
      .thenDecide({ events: [result(b, "null")], effects: [["step:t1:m1#2", "model.step"]] }))

  it("given the last allowed step, when its last call succeeds, then the turn ends failed at the step limit", () =>
    spec(makeThread({ stepLimit: 1 }))
      .given([...twoCalls, result(a, "ok")])
      .when(toolOutcome(b, "succeeded", { response: 1 }))
      .thenDecide({
        events: [
          result(b, "1"),
          {
            type: "turn.ended",
            turnId: "t1:m1",
            status: "failed",
            reason: "step limit of 1 model steps reached",
            synthetic: []
          }
        ],
        cancel: ["step:t1:m1#1"]
      }))

  it("given two calls, when one is cancelled, then its result says so and the turn goes on", () =>
    Thread.given(twoCalls)
      .when(toolOutcome(a, "cancelled", { error: { message: "by an operator", reason: "cancelled" } }))
      .thenDecide({
        events: [
          {
            type: "tool.result",
            turnId: "t1:m1",
            result: {
              callId: "a",
              transcriptId: "a",
              effectId: a.effectId,
              content: "cancelled: by an operator",
              outcome: "cancelled"
            }
          }
        ]
      }))

  it("given two calls, when one fails in its handler, then the model reads the error and the turn goes on", () =>
    Thread.given(twoCalls)
      .when(toolOutcome(a, "failed", { error: { message: "no such file", code: "ENOENT", reason: "handler" } }))
      .thenDecide({ events: [result(a, "error: no such file", "failed")] }))

  it("given two calls, when one fails because the store refused, then the turn ends failed and the other call gets a synthetic result", () =>
    Thread.given(twoCalls)
      .when(
        toolOutcome(a, "failed", { error: { message: "storage: SQLITE_FULL", code: "SQLITE_FULL", reason: "storage" } })
      )
      .thenDecide({
        events: [
          {
            type: "tool.result",
            turnId: "t1:m1",
            result: {
              callId: "a",
              transcriptId: "a",
              effectId: a.effectId,
              content: "error: storage: SQLITE_FULL",
              outcome: "storage"
            }
          },
          {
            type: "turn.ended",
            turnId: "t1:m1",
            status: "failed",
            reason: "storage: SQLITE_FULL",
            synthetic: [
              {
                callId: "b",
                transcriptId: "b",
                effectId: b.effectId,
                content: "failed: the turn failed before this call finished (storage: SQLITE_FULL)",
                outcome: "failed"
              }
            ]
          }
        ],
        cancel: ["step:t1:m1#1", b.effectId]
      }))

  it("given a command running, when its process ended, then the model is told it may or may not have run and what to verify", () => {
    const x = call("x", "execute")
    Thread.given([...running, responded(1, [x])])
      .when(
        toolOutcome(x, "failed", {
          by: "reconcile",
          error: {
            message: "server process ended before the effect completed",
            code: "process-ended",
            reason: "process-lost"
          }
        })
      )
      .thenDecide({
        events: [
          {
            type: "tool.result",
            turnId: "t1:m1",
            result: {
              callId: "x",
              transcriptId: "x",
              effectId: x.effectId,
              content:
                'interrupted: tool.execute tool:t1:m1:x may or may not have taken effect (the command "make" requested at 1970-01-01T00:00:00.000Z may have started; any process of it died with the server, so it may have partly run); verify whether the command "make" already ran before repeating it',
              outcome: "interrupted"
            }
          }
        ],
        effects: [["step:t1:m1#2", "model.step"]]
      })
  })

  it("given a process-bound call, when it timed out, then it is interrupted (it may have taken effect)", () => {
    const x = call("x", "execute")
    Thread.given([...running, responded(1, [x])])
      .when(
        toolOutcome(x, "failed", {
          error: { message: "timed out after 5m; may or may not have taken effect", code: "timeout", reason: "timeout" }
        })
      )
      .thenDecide({
        events: [
          {
            type: "tool.result",
            turnId: "t1:m1",
            result: {
              callId: "x",
              transcriptId: "x",
              effectId: x.effectId,
              content:
                'interrupted: tool.execute tool:t1:m1:x may or may not have taken effect; verify whether the command "make" already ran before repeating it',
              outcome: "interrupted"
            }
          }
        ],
        effects: [["step:t1:m1#2", "model.step"]]
      })
  })

  it("given a replay-safe call, when it timed out for the last time, then it failed (it was retried, not cut off)", () =>
    Thread.given(twoCalls)
      .when(
        toolOutcome(a, "failed", {
          error: { message: "timed out after 30s (gave up after 5 attempts)", code: "timeout", reason: "timeout" }
        })
      )
      .thenDecide({ events: [result(a, "error: timed out after 30s (gave up after 5 attempts)", "failed")] }))

  it("given two calls, when one's stored payload could not be read, then the model reads why it was not performed and the turn goes on", () =>
    Thread.given(twoCalls)
      .when(toolOutcome(a, "failed", { payload: null, error: undecodable }))
      .thenDecide({ events: [result(a, `error: ${undecodable.message}`, "failed")] }))

  it("given an answered call, when its undecodable outcome arrives, then it is recorded late under its turn (found by its effect id)", () =>
    Thread.given([...twoCalls, result(a, "ok")])
      .when(toolOutcome(a, "failed", { payload: null, error: undecodable }))
      .thenDecide({ events: [{ type: "effect.late", turnId: "t1:m1", effectId: a.effectId, status: "failed" }] }))

  it("given a step that went on, when an old call's undecodable outcome arrives, then it is recorded late under no turn", () =>
    Thread.given([...twoCalls, result(a, "ok"), result(b, "ok")])
      .when(toolOutcome(a, "failed", { payload: null, error: undecodable }))
      .thenDecide({ events: [{ type: "effect.late", turnId: "", effectId: a.effectId, status: "failed" }] }))

  it("given a closed turn, when a call's outcome arrives, then it is recorded late and the transcript is untouched", () =>
    Thread.given([
      ...twoCalls,
      { type: "turn.ended", turnId: "t1:m1", status: "interrupted", reason: "x", synthetic: [] }
    ])
      .when(toolOutcome(a, "succeeded", { response: 1 }))
      .thenDecide({ events: [{ type: "effect.late", turnId: "t1:m1", effectId: a.effectId, status: "succeeded" }] }))

  it("given an answered call, when its outcome arrives again, then it is recorded late", () =>
    Thread.given([...twoCalls, result(a, "ok")])
      .when(toolOutcome(a, "failed", { error: { message: "again", reason: "handler" } }))
      .thenDecide({ events: [{ type: "effect.late", turnId: "t1:m1", effectId: a.effectId, status: "failed" }] }))

  it("given a process-bound call answered in a closed turn, when an operator retries it, then call-answered", () => {
    const x = call("x", "execute")
    Thread.given([
      ...running,
      responded(1, [x]),
      { type: "turn.ended", turnId: "t1:m1", status: "failed", reason: "x", synthetic: [] }
    ])
      .when(
        toolOutcome(x, "retrying", { by: "operator", error: { message: "retried by an operator", reason: "operator" } })
      )
      .thenReject("call-answered")
  })

  it("given a replay-safe call answered in a closed turn, when an operator retries it, then the domain waits for its outcome", () =>
    Thread.given([...twoCalls, { type: "turn.ended", turnId: "t1:m1", status: "failed", reason: "x", synthetic: [] }])
      .when(
        toolOutcome(a, "retrying", { by: "operator", error: { message: "retried by an operator", reason: "operator" } })
      )
      .thenDecide({}))
})

describe("Thread spec: thread cleanup", () => {
  const deleted: ReadonlyArray<ThreadEvent> = [created, { type: "thread.deleted" }]
  const cleanup = (status: EffectOutcome["status"]): EffectOutcome => ({
    effectId: "cleanup:t1",
    kind: "thread.cleanup",
    payload: { threadId: "t1" },
    attempt: 1,
    status,
    by: "reactor"
  })

  it("given a deleted thread, when its cleanup succeeds, then the thread is cleaned", () =>
    Thread.given(deleted)
      .when(cleanup("succeeded"))
      .thenDecide({ events: [{ type: "thread.cleaned" }] }))

  it("given a deleted thread, when its cleanup fails, then nothing is recorded", () =>
    Thread.given(deleted).when(cleanup("failed")).thenDecide({}))
})

// ---- a long history ---------------------------------------------------------------------------

/**
 * A thread months old: `turns` completed turns, each one step with two calls (a cron trigger firing
 * every minute makes 40,000 in four weeks). The state folded from it must answer as a new thread's:
 * its seen message and transcript ids were arrays copied whole on every event, so folding this many
 * turns (a restart, a cache eviction) took minutes and each new event copied them again.
 */
const longHistory = (turns: number): Array<ThreadEvent> => {
  const events: Array<ThreadEvent> = [created]
  for (let i = 1; i <= turns; i++) {
    const turnId = `t1:h${i}`
    const calls = [`h${i}a`, `h${i}b`].map((id) => ({ ...call(id), effectId: `tool:${turnId}:${id}` }))
    events.push(
      { type: "turn.started", turnId, ordinal: i, messageId: `h${i}`, text: "tick" },
      { type: "model.responded", turnId, step: 1, text: "", toolCalls: calls },
      { type: "turn.completed", turnId, steps: 1, text: "done" }
    )
  }
  return events
}

describe("Thread spec: a long history", () => {
  const turns = 50_000
  const thread = makeThread()

  it(`given ${turns.toLocaleString("en-US")} turns, when the first turn's message id is sent again, then duplicate-message; a new one starts a turn`, async ({
    signal
  }) => {
    const state = await foldLetting(thread, longHistory(turns), signal)
    const again = thread.decide(
      state,
      { commandId: "c", type: "message.send", threadId: "t1", messageId: "h1", text: "tick" },
      ctx
    )
    assert.strictEqual(again._tag === "Rejection" ? again.reason : "accepted", "duplicate-message")
    const next = thread.decide(
      state,
      { commandId: "c", type: "message.send", threadId: "t1", messageId: "m1", text: "go" },
      ctx
    )
    if (next._tag === "Rejection") return assert.fail(`rejected: ${next.reason}`)
    assert.deepStrictEqual(next.events, [started("m1", turns + 1)])
  })

  it(`given ${turns.toLocaleString("en-US")} turns and a new one running, when its step reuses the first turn's call id, then the call gets a thread-unique transcript id`, async ({
    signal
  }) => {
    const state = await foldLetting(thread, [...longHistory(turns), started("m1", turns + 1)], signal)
    const answer = thread.onOutcome!(
      state,
      stepOutcome(1, "succeeded", {
        response: { text: "", toolCalls: [{ id: "h1a", name: "publish", arguments: a.arguments }] }
      }),
      ctx
    )
    if (answer._tag === "Rejection") return assert.fail(`rejected: ${answer.reason}`)
    const planned = answer.events[0]?.type === "model.responded" ? answer.events[0].toolCalls : []
    assert.deepStrictEqual(
      planned.map((c) => [c.callId, c.transcriptId]),
      [["h1a", `h1a_t${turns + 1}`]]
    )
  })
})

/**
 * A backlog: messages queued while a turn runs (a trigger that fires faster than the thread's turns
 * end, or a turn waiting a weekend for an approval). The queue was an array copied whole on every
 * `message.queued` and filtered on every `turn.started`: 20,000 queued messages and their turns took
 * 14 s to fold, 50,000 took 170 s.
 */
const backlog = (messages: number, drained: number): Array<ThreadEvent> => {
  const events: Array<ThreadEvent> = [created, started("m0", 1)]
  for (let i = 1; i <= messages; i++) events.push(queued(`q${i}`))
  // Each of the first `drained` queued messages runs its turn, in order.
  for (let i = 1; i <= drained; i++) {
    events.push({ type: "turn.completed", turnId: i === 1 ? "t1:m0" : `t1:q${i - 1}`, steps: 1, text: "done" })
    events.push({ type: "turn.started", turnId: `t1:q${i}`, ordinal: i + 1, messageId: `q${i}`, text: "next" })
  }
  return events
}

describe("Thread spec: a backlog", () => {
  const messages = 50_000
  const thread = makeThread()
  const answerOf = (turnId: string) =>
    ({
      effectId: `step:${turnId}#1`,
      kind: "model.step",
      payload: { threadId: "t1", turnId, step: 1 },
      attempt: 1,
      status: "succeeded",
      by: "reactor",
      response: { text: "done", toolCalls: [] }
    }) satisfies EffectOutcome

  it(`given ${messages.toLocaleString("en-US")} messages queued behind a running turn, when it completes, then the first queued starts; a queued id is still a duplicate`, async ({
    signal
  }) => {
    const state = await foldLetting(thread, backlog(messages, 0), signal)
    const next = thread.onOutcome!(state, answerOf("t1:m0"), ctx)
    if (next._tag === "Rejection") return assert.fail(`rejected: ${next.reason}`)
    assert.deepStrictEqual(next.events.slice(1), [started("q1", 2, "next")])
    const again = thread.decide(
      state,
      { commandId: "c", type: "message.send", threadId: "t1", messageId: `q${messages}`, text: "next" },
      ctx
    )
    assert.strictEqual(again._tag === "Rejection" ? again.reason : "accepted", "duplicate-message")
  })

  it(`given ${messages.toLocaleString("en-US")} queued messages all but one drained in order, when the running turn completes, then the last starts and nothing is left queued`, async ({
    signal
  }) => {
    const state = await foldLetting(thread, backlog(messages, messages - 1), signal)
    const last = thread.onOutcome!(state, answerOf(`t1:q${messages - 1}`), ctx)
    if (last._tag === "Rejection") return assert.fail(`rejected: ${last.reason}`)
    assert.deepStrictEqual(last.events.slice(1), [started(`q${messages}`, messages + 1, "next")])
    const drained = last.events.reduce(thread.evolve, state)
    const end = thread.onOutcome!(drained, answerOf(`t1:q${messages}`), ctx)
    if (end._tag === "Rejection") return assert.fail(`rejected: ${end.reason}`)
    assert.deepStrictEqual(
      end.events.map((e) => e.type),
      ["turn.completed"]
    )
  })
})
