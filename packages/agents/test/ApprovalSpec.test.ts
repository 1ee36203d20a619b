/**
 * Approval of tool calls as a specification: given the thread's events, when a model step asks for a
 * call that needs approval, an operator answers, or the deadline's timer fires, then these events,
 * effects, timers and cancels (or this rejection). Pure: no store, no engine, no reactor.
 */
import { assert, describe, it } from "@effect/vitest"
import { Decision, type DecideContext, type EffectOutcome, type TimerFailure, type Timers } from "@orchestration/engine"
import * as Approval from "../src/Approval.js"
import { makeThread, type CallRecord, type ThreadAggregate, type ThreadEvent } from "../src/Thread.js"
import { foldLetting } from "./fixtures/fold.js"

type Command = Parameters<ThreadAggregate["decide"]>[1]

const HOUR = 3_600_000
const thread = makeThread({ approval: Approval.required(24 * HOUR) })
const ctxOf = (commandId: string, now = 1_000): DecideContext => ({
  commandId,
  aggregateId: "t1",
  now,
  deriveId: (key) => `${commandId}:${key}`
})

interface Expected {
  readonly events?: ReadonlyArray<ThreadEvent>
  /** Effects as `[id, kind]`. */
  readonly effects?: ReadonlyArray<readonly [string, string]>
  readonly cancel?: ReadonlyArray<string>
  readonly timers?: ReadonlyArray<Timers.TimerIntent>
  readonly cancelTimers?: ReadonlyArray<string>
}

const decideIn = (
  aggregate: ThreadAggregate,
  events: ReadonlyArray<ThreadEvent>,
  input: Command | EffectOutcome | TimerFailure,
  ctx: DecideContext
) => {
  const state = events.reduce(aggregate.evolve, aggregate.initialState)
  // A timer's failure is decided as the engine does (TimerFailures.ts): no onTimerFailed records nothing.
  const answer =
    "status" in input
      ? aggregate.onOutcome!(state, input, ctx)
      : "timerId" in input
        ? (aggregate.onTimerFailed?.(state, input, ctx) ?? Decision.none<ThreadEvent>())
        : aggregate.decide(state, input as Command, ctx)
  return { state, answer }
}

/** given(events).when(command or outcome, ctx).then(decision) | .thenReject(reason). */
const given = (events: ReadonlyArray<ThreadEvent>, aggregate: ThreadAggregate = thread) => ({
  when: (input: Command | EffectOutcome | TimerFailure, ctx: DecideContext = ctxOf("cmd")) => {
    const { answer, state } = decideIn(aggregate, events, input, ctx)
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
        assert.deepStrictEqual(answer.timers ?? [], expected.timers ?? [])
        assert.deepStrictEqual(answer.cancelTimers ?? [], expected.cancelTimers ?? [])
        // What was decided must fold into the state without surprise.
        answer.events.reduce(aggregate.evolve, state)
        return answer
      },
      thenReject: (reason: string) => {
        if (answer._tag !== "Rejection") assert.fail(`accepted with ${answer.events.length} events`)
        assert.strictEqual(answer.reason, reason)
        return answer
      }
    }
  }
})

// ---- fixtures ---------------------------------------------------------------------------------

const created: ThreadEvent = { type: "thread.created", title: null }
const started: ThreadEvent = { type: "turn.started", turnId: "t1:m1", ordinal: 1, messageId: "m1", text: "go" }
const running = [created, started]
const stepOutcomeId = "outcome:step:t1:m1#1#1"

const call = (id: string, name: string, args: unknown): CallRecord => ({
  callId: id,
  transcriptId: id,
  effectId: `tool:t1:m1:${id}`,
  name,
  arguments: args,
  at: 1_000
})
const exec = call("x", "execute", { command: "make deploy" })
const pub = call("p", "publish", { path: "a.md", content: "x" })

const stepResponded = (outcome: {
  toolCalls: ReadonlyArray<{ id: string; name: string; arguments: unknown; mcp?: unknown }>
}): EffectOutcome => ({
  effectId: "step:t1:m1#1",
  kind: "model.step",
  payload: { threadId: "t1", turnId: "t1:m1", step: 1 },
  attempt: 1,
  status: "succeeded",
  by: "reactor",
  response: { text: "", toolCalls: outcome.toolCalls }
})

const responded = (calls: ReadonlyArray<CallRecord>): ThreadEvent => ({
  type: "model.responded",
  turnId: "t1:m1",
  step: 1,
  text: "",
  toolCalls: calls
})
const effectOf = (c: CallRecord) => ({
  id: c.effectId,
  kind: `tool.${c.name}`,
  payload: { threadId: "t1", turnId: "t1:m1", callId: c.callId, name: c.name, arguments: c.arguments }
})
const deadline = 1_000 + 24 * HOUR
const requested = (c: CallRecord): ThreadEvent => ({
  type: "approval.requested",
  turnId: "t1:m1",
  transcriptId: c.transcriptId,
  effect: effectOf(c),
  deadline,
  timeoutMs: 24 * HOUR,
  token: stepOutcomeId
})
const closed = (
  c: CallRecord,
  verdict: "approved" | "denied" | "expired" | "cancelled",
  note: string | null = null
): ThreadEvent => ({
  type: "approval.closed",
  turnId: "t1:m1",
  transcriptId: c.transcriptId,
  verdict,
  note
})
const result = (c: CallRecord, content: string, outcome: "succeeded" | "denied" | "interrupted"): ThreadEvent => ({
  type: "tool.result",
  turnId: "t1:m1",
  result: { callId: c.callId, transcriptId: c.transcriptId, effectId: c.effectId, content, outcome }
})
const deadlineTimer = (c: CallRecord): Timers.TimerIntent => ({
  timerId: `wait.approval.${c.transcriptId}`,
  at: deadline,
  command: { type: "tool.approval-timeout", threadId: "t1", wait: `approval.${c.transcriptId}`, token: stepOutcomeId }
})

const approve = (callId: string, commandId = "approve-1", note?: string): Command => ({
  commandId,
  type: "tool.approve",
  threadId: "t1",
  callId,
  ...(note === undefined ? {} : { note })
})
const deny = (callId: string, reason?: string): Command => ({
  commandId: "deny-1",
  type: "tool.deny",
  threadId: "t1",
  callId,
  ...(reason === undefined ? {} : { reason })
})
const timeout = (c: CallRecord, token = stepOutcomeId): Command => ({
  commandId: "timer:thread:t1:wait.approval.x#1",
  type: "tool.approval-timeout",
  threadId: "t1",
  wait: `approval.${c.transcriptId}`,
  token
})
const timerCtx = ctxOf("timer:thread:t1:wait.approval.x#1", deadline)

const awaiting = [...running, responded([exec]), requested(exec)]
const mixed = [...running, responded([exec, pub]), requested(exec)]
const nextStep: readonly [string, string] = ["step:t1:m1#2", "model.step"]

// ---- asking -----------------------------------------------------------------------------------

describe("Approval spec: a step's calls", () => {
  it("given APPROVAL=off (the default), when the model asks for execute, then its effect is written at once", () =>
    given(running, makeThread())
      .when(
        stepResponded({ toolCalls: [{ id: "x", name: "execute", arguments: exec.arguments }] }),
        ctxOf(stepOutcomeId)
      )
      .thenDecide({ events: [responded([exec])], effects: [[exec.effectId, "tool.execute"]] }))

  it("given APPROVAL=required, when the model asks for execute and publish, then publish runs and execute waits with a deadline timer and no effect", () =>
    given(running)
      .when(
        stepResponded({
          toolCalls: [
            { id: "x", name: "execute", arguments: exec.arguments },
            { id: "p", name: "publish", arguments: pub.arguments }
          ]
        }),
        ctxOf(stepOutcomeId)
      )
      .thenDecide({
        events: [responded([exec, pub]), requested(exec)],
        effects: [[pub.effectId, "tool.publish"]],
        timers: [deadlineTimer(exec)]
      }))

  it("given APPROVAL=required, when a process-bound MCP tool is called, then it waits; a replay-safe one runs", () => {
    const { answer } = decideIn(
      thread,
      running,
      stepResponded({
        toolCalls: [
          {
            id: "w",
            name: "fs__write",
            arguments: {},
            mcp: { server: "fs", tool: "write", onProcessLoss: "process-bound" }
          },
          {
            id: "r",
            name: "fs__read",
            arguments: {},
            mcp: { server: "fs", tool: "read", onProcessLoss: "replay-safe" }
          }
        ]
      }),
      ctxOf(stepOutcomeId)
    )
    if (answer._tag === "Rejection") return assert.fail(answer.message)
    assert.deepStrictEqual(
      answer.effects.map((e) => e.id),
      ["tool:t1:m1:r"]
    )
    assert.deepStrictEqual(
      answer.events.filter((e) => e.type === "approval.requested").map((e) => e.transcriptId),
      ["w"]
    )
    assert.deepStrictEqual(
      answer.timers?.map((t) => t.timerId),
      ["wait.approval.w"]
    )
  })

  it("given a per-tool list, when execute and a listed publish are called, then only publish waits", () => {
    const { answer } = decideIn(
      makeThread({ approval: { mode: "required", tools: ["publish"], timeoutMs: HOUR } }),
      running,
      stepResponded({
        toolCalls: [
          { id: "x", name: "execute", arguments: exec.arguments },
          { id: "p", name: "publish", arguments: pub.arguments }
        ]
      }),
      ctxOf(stepOutcomeId)
    )
    if (answer._tag === "Rejection") return assert.fail(answer.message)
    assert.deepStrictEqual(
      answer.effects.map((e) => e.id),
      [exec.effectId]
    )
    assert.deepStrictEqual(
      answer.events.filter((e) => e.type === "approval.requested").map((e) => e.transcriptId),
      ["p"]
    )
  })
})

// ---- answering ------------------------------------------------------------------------------

describe("Approval spec: approve and deny", () => {
  it("given a call awaiting approval, when approved, then its effect is written now and its deadline timer cancelled", () =>
    given(awaiting)
      .when(approve("x", "approve-1", "looks fine"))
      .thenDecide({
        events: [closed(exec, "approved", "looks fine")],
        effects: [[exec.effectId, "tool.execute"]],
        cancelTimers: ["wait.approval.x"]
      }))

  it("given an approved call, when approved again (another command id), then it is accepted and changes nothing", () =>
    given([...awaiting, closed(exec, "approved")])
      .when(approve("x", "approve-2"))
      .thenDecide({}))

  it("given a call awaiting approval, when denied with a reason, then the model is told it was denied and why, and the turn goes on", () =>
    given(awaiting)
      .when(deny("x", "not on a Friday"))
      .thenDecide({
        events: [
          closed(exec, "denied", "not on a Friday"),
          result(exec, "denied by the operator: not on a Friday; the call was not performed", "denied")
        ],
        effects: [nextStep],
        cancelTimers: ["wait.approval.x"]
      }))

  it("given one of two calls awaiting approval, when denied, then the turn waits for the other call's result", () =>
    given(mixed)
      .when(deny("x"))
      .thenDecide({
        events: [closed(exec, "denied"), result(exec, "denied by the operator; the call was not performed", "denied")],
        cancelTimers: ["wait.approval.x"]
      }))

  it("given a denied call, when denied again, then it is accepted and changes nothing", () =>
    given([...awaiting, closed(exec, "denied")])
      .when(deny("x"))
      .thenDecide({}))

  it("given a denied call, when approved, then it is a conflict (a stored rejection), not a silent success", () =>
    given([...awaiting, closed(exec, "denied"), result(exec, "denied", "denied")])
      .when(approve("x"))
      .thenReject("approval-conflict"))

  it("given an approved call, when denied, then it is a conflict", () =>
    given([...awaiting, closed(exec, "approved")])
      .when(deny("x"))
      .thenReject("approval-conflict"))

  it("given no such call, when approved, then approval-unknown", () =>
    given(awaiting).when(approve("nope")).thenReject("approval-unknown"))

  it("given a call that needed no approval, when approved, then approval-unknown", () =>
    given(mixed).when(approve("p")).thenReject("approval-unknown"))
})

// ---- a stored request, damaged ------------------------------------------------------------------

/**
 * An approved call's effect is written from its stored `approval.requested` event, whose payload the
 * event's schema does not check: damage there (a hand edit, a bad migration, an older build's shape)
 * must not make the decider throw. The effect is written as stored, and its handler fails it
 * unperformed (`payload-undecodable`, ApprovalTurn.test.ts shows it end to end).
 */
describe("Approval spec: an approved call whose stored effect payload is damaged", () => {
  const delegating = makeThread({ approval: { mode: "required", tools: ["delegate"], timeoutMs: 24 * HOUR } })
  const helper = call("d", "delegate", { threadId: "helper", text: "summarise", await: true })
  const damaged = [
    ["null", null],
    ["absent", undefined],
    ["without its turn", { threadId: "t1", callId: "d", name: "delegate", arguments: helper.arguments }]
  ] as const
  for (const [what, payload] of damaged)
    it(`(${what}) given an awaited delegate awaiting approval, when approved, then its effect is written as stored, no chain added`, () => {
      const stored = { ...requested(helper), effect: { ...effectOf(helper), payload } } as ThreadEvent
      const answer = given([...running, responded([helper]), stored], delegating)
        .when(approve("d"))
        .thenDecide({
          events: [closed(helper, "approved")],
          effects: [[helper.effectId, "tool.delegate"]],
          cancelTimers: ["wait.approval.d"]
        })
      assert.deepStrictEqual(answer.effects[0]!.payload, payload)
    })

  it("given an awaited delegate awaiting approval, when approved, then its effect carries the chain of threads waiting", () => {
    const answer = given([...running, responded([helper]), requested(helper)], delegating)
      .when(approve("d"))
      .thenDecide({
        events: [closed(helper, "approved")],
        effects: [[helper.effectId, "tool.delegate"]],
        cancelTimers: ["wait.approval.d"]
      })
    assert.deepStrictEqual(answer.effects[0]!.payload, { ...effectOf(helper).payload, awaitChain: ["t1"] })
  })
})

// ---- the deadline -------------------------------------------------------------------------------

describe("Approval spec: the deadline against a racing answer", () => {
  it("given a call awaiting approval, when its deadline fires, then it is denied for want of an answer, naming the configured duration", () =>
    given(awaiting)
      .when(timeout(exec), timerCtx)
      .thenDecide({
        events: [
          closed(exec, "expired"),
          result(exec, "denied: no approval within 24 h; the call was not performed", "denied")
        ],
        effects: [nextStep]
      }))

  it("given a 90-minute policy, when the deadline fires, then the result says 90 min", () => {
    const shortThread = makeThread({ approval: Approval.required(90 * 60_000) })
    const shortRequested: ThreadEvent = {
      ...(requested(exec) as Extract<ThreadEvent, { type: "approval.requested" }>),
      timeoutMs: 90 * 60_000
    }
    const { answer } = decideIn(shortThread, [...running, responded([exec]), shortRequested], timeout(exec), timerCtx)
    if (answer._tag === "Rejection") return assert.fail(answer.message)
    const denied = answer.events.find((e) => e.type === "tool.result")
    assert.strictEqual(
      denied?.type === "tool.result" ? denied.result.content : undefined,
      "denied: no approval within 90 min; the call was not performed"
    )
  })

  it("given an approve landed first, when the deadline's timer fires anyway, then the timer's command is the stored rejection", () =>
    given([...awaiting, closed(exec, "approved")])
      .when(timeout(exec), timerCtx)
      .thenReject("wait-closed"))

  it("given the deadline landed first, when the approve arrives, then the approve is the stored rejection", () =>
    given([...awaiting, closed(exec, "expired"), result(exec, "denied: no approval within 24 h", "denied")])
      .when(approve("x"))
      .thenReject("approval-conflict"))

  it("given the deadline landed first, when a deny arrives, then it is a conflict too (expired is not denied by the operator)", () =>
    given([...awaiting, closed(exec, "expired"), result(exec, "denied: no approval within 24 h", "denied")])
      .when(deny("x"))
      .thenReject("approval-conflict"))

  it("given a call awaiting approval, when a client sends the timeout command, then it is refused: only the timer sends it", () =>
    given(awaiting).when(timeout(exec), ctxOf("client-forged", deadline)).thenReject("internal-command"))

  it("given a call awaiting approval, when a timeout of another opening arrives, then it is stale", () =>
    given(awaiting).when(timeout(exec, "outcome:other"), timerCtx).thenReject("wait-closed"))
})

// ---- a deadline that cannot fire -----------------------------------------------------------------

/** What the engine tells the thread when the deadline's timer can never fire (TimerFailures.ts). */
const deadlineFailed = (c: CallRecord, fields: Partial<TimerFailure> = {}): TimerFailure => ({
  timerId: `wait.approval.${c.transcriptId}`,
  generation: 1,
  at: deadline,
  command: deadlineTimer(c).command,
  reason: "defect",
  message: "failed in its aggregate's code at each of 5 tries; the last: decide threw for thread 't1': boom",
  ...fields
})
const failedCtx = ctxOf("timer:thread:t1:wait.approval.x#1:failed", deadline + 120_000)

describe("Approval spec: a deadline timer that cannot fire", () => {
  it("given a call awaiting approval, when its deadline's timer can never fire, then the turn ends failed naming it, the approval cancelled", () =>
    given(mixed)
      .when(deadlineFailed(exec), failedCtx)
      .thenDecide({
        events: [
          {
            type: "turn.timer-failed",
            turnId: "t1:m1",
            wait: "approval",
            transcriptId: "x",
            timerId: "wait.approval.x",
            at: deadline,
            reason: "defect",
            message: "failed in its aggregate's code at each of 5 tries; the last: decide threw for thread 't1': boom"
          },
          closed(exec, "cancelled", "the deadline of call 'x' awaiting approval could not fire (defect)"),
          {
            type: "turn.ended",
            turnId: "t1:m1",
            status: "failed",
            reason: "the deadline of call 'x' awaiting approval could not fire (defect)",
            synthetic: [
              {
                callId: "x",
                transcriptId: "x",
                effectId: exec.effectId,
                content:
                  "failed: the turn failed while this call waited for approval (the deadline of call 'x' awaiting approval could not fire (defect)); it was not performed",
                outcome: "failed"
              },
              {
                callId: "p",
                transcriptId: "p",
                effectId: pub.effectId,
                content:
                  "failed: the turn failed before this call finished (the deadline of call 'x' awaiting approval could not fire (defect))",
                outcome: "failed"
              }
            ]
          }
        ],
        cancel: ["step:t1:m1#1", pub.effectId],
        cancelTimers: ["wait.approval.x"]
      }))

  it("given a call awaiting approval, when its deadline's stored command is unreadable, then the turn ends failed the same way", () => {
    const answer = given(awaiting)
      .when(deadlineFailed(exec, { command: null, reason: "unreadable", message: "not JSON" }), failedCtx)
      .thenDecide({
        events: [
          {
            type: "turn.timer-failed",
            turnId: "t1:m1",
            wait: "approval",
            transcriptId: "x",
            timerId: "wait.approval.x",
            at: deadline,
            reason: "unreadable",
            message: "not JSON"
          },
          closed(exec, "cancelled", "the deadline of call 'x' awaiting approval could not fire (unreadable)"),
          {
            type: "turn.ended",
            turnId: "t1:m1",
            status: "failed",
            reason: "the deadline of call 'x' awaiting approval could not fire (unreadable)",
            synthetic: [
              {
                callId: "x",
                transcriptId: "x",
                effectId: exec.effectId,
                content:
                  "failed: the turn failed while this call waited for approval (the deadline of call 'x' awaiting approval could not fire (unreadable)); it was not performed",
                outcome: "failed"
              }
            ]
          }
        ],
        cancel: ["step:t1:m1#1"],
        cancelTimers: ["wait.approval.x"]
      })
    // The closed approval answers a late approve as a conflict: nothing runs.
    given([...awaiting, ...answer.events])
      .when(approve("x"))
      .thenReject("approval-conflict")
  })

  it("given the wait closed already, or reopened since, when an old deadline's failure arrives, then nothing changes", () => {
    given([...awaiting, closed(exec, "approved")])
      .when(deadlineFailed(exec), failedCtx)
      .thenDecide({})
    given(awaiting)
      .when(deadlineFailed(exec, { at: deadline - 1 }), failedCtx)
      .thenDecide({})
    given(awaiting)
      .when(deadlineFailed(exec, { timerId: "wait.approval.other" }), failedCtx)
      .thenDecide({})
    given(awaiting)
      .when(deadlineFailed(exec, { timerId: "some.other.timer" }), failedCtx)
      .thenDecide({})
  })
})

// ---- the turn's end -------------------------------------------------------------------------

describe("Approval spec: a turn that ends cancels its open approvals", () => {
  it("given a call awaiting approval, when the turn is interrupted, then its approval is cancelled with its timer and its synthetic result says it was never performed", () =>
    given(mixed)
      .when({ commandId: "stop", type: "turn.interrupt", threadId: "t1", turnId: "t1:m1" })
      .thenDecide({
        events: [
          closed(exec, "cancelled", "interrupted by the user"),
          {
            type: "turn.ended",
            turnId: "t1:m1",
            status: "interrupted",
            reason: "interrupted by the user",
            synthetic: [
              {
                callId: "x",
                transcriptId: "x",
                effectId: exec.effectId,
                content:
                  "interrupted: the turn was interrupted while this call waited for approval (interrupted by the user); it was not performed",
                outcome: "interrupted"
              },
              {
                callId: "p",
                transcriptId: "p",
                effectId: pub.effectId,
                content: "interrupted: the turn was interrupted before this call finished (interrupted by the user)",
                outcome: "interrupted"
              }
            ]
          }
        ],
        // The waiting call has no row to cancel; the publish and the step do.
        cancel: ["step:t1:m1#1", pub.effectId],
        cancelTimers: ["wait.approval.x"]
      }))

  it("given an interrupted turn, when its call is approved afterwards, then it is a conflict and nothing runs", () =>
    given([
      ...awaiting,
      closed(exec, "cancelled", "interrupted by the user"),
      { type: "turn.ended", turnId: "t1:m1", status: "interrupted", reason: "interrupted by the user", synthetic: [] }
    ])
      .when(approve("x"))
      .thenReject("approval-conflict"))

  it("given an interrupted turn, when the cancelled deadline fires anyway, then it is the stored rejection", () =>
    given([
      ...awaiting,
      closed(exec, "cancelled", "interrupted by the user"),
      { type: "turn.ended", turnId: "t1:m1", status: "interrupted", reason: "interrupted by the user", synthetic: [] }
    ])
      .when(timeout(exec), timerCtx)
      .thenReject("wait-closed"))

  it("given a call awaiting approval, when the thread is deleted, then the approval is cancelled with its timer", () =>
    given(awaiting)
      .when({ commandId: "del", type: "thread.delete", threadId: "t1" })
      .thenDecide({
        events: [
          closed(exec, "cancelled", "thread deleted"),
          {
            type: "turn.ended",
            turnId: "t1:m1",
            status: "interrupted",
            reason: "thread deleted",
            synthetic: [
              {
                callId: "x",
                transcriptId: "x",
                effectId: exec.effectId,
                content:
                  "interrupted: the turn was interrupted while this call waited for approval (thread deleted); it was not performed",
                outcome: "interrupted"
              }
            ]
          },
          { type: "thread.deleted" }
        ],
        effects: [["cleanup:t1", "thread.cleanup"]],
        cancel: ["step:t1:m1#1"],
        cancelTimers: ["wait.approval.x"]
      }))

  it("given the last call denied at the step limit, when the turn fails there, then no approval is cancelled twice", () =>
    given(awaiting, makeThread({ stepLimit: 1, approval: Approval.required(24 * HOUR) }))
      .when(deny("x"))
      .thenDecide({
        events: [
          closed(exec, "denied"),
          result(exec, "denied by the operator; the call was not performed", "denied"),
          {
            type: "turn.ended",
            turnId: "t1:m1",
            status: "failed",
            reason: "step limit of 1 model steps reached",
            synthetic: []
          }
        ],
        cancel: ["step:t1:m1#1"],
        cancelTimers: ["wait.approval.x"]
      }))
})

// ---- a long history ------------------------------------------------------------------------------

/**
 * A thread that asked for approval of a call in each of `turns` turns, each approved (a cron trigger
 * whose turn runs `execute` every minute makes 40,000 in four weeks). Its approvals and waits are kept
 * for the thread's life, so a late answer is judged: they were records copied whole on every
 * `approval.requested` and `approval.closed`, and 5,000 of them took 23 s to fold.
 */
const approvedHistory = (turns: number): Array<ThreadEvent> => {
  const events: Array<ThreadEvent> = [created]
  for (let i = 1; i <= turns; i++) {
    const turnId = `t1:h${i}`
    const x: CallRecord = { ...exec, callId: `x${i}`, transcriptId: `x${i}`, effectId: `tool:${turnId}:x${i}` }
    const inTurn = <E extends ThreadEvent>(event: E): E => ({ ...event, turnId })
    events.push(
      { type: "turn.started", turnId, ordinal: i, messageId: `h${i}`, text: "tick" },
      inTurn(responded([x])),
      inTurn(requested(x)),
      inTurn(closed(x, "approved")),
      inTurn(result(x, "done", "succeeded")),
      { type: "turn.completed", turnId, steps: 2, text: "done" }
    )
  }
  return events
}

describe("Approval spec: a long history", () => {
  const turns = 20_000
  const first = { ...exec, callId: "x1", transcriptId: "x1" }
  const history = approvedHistory(turns)
  const newTurn: ThreadEvent = { ...started, ordinal: turns + 1 } as ThreadEvent

  it(`given ${turns.toLocaleString("en-US")} approved calls, when the first is approved again, denied, or its deadline fires, then the same answer changes nothing and the others are refused`, async ({
    signal
  }) => {
    const state = await foldLetting(thread, history, signal)
    const again = thread.decide(state, approve("x1", "approve-again"), ctxOf("approve-again"))
    if (again._tag === "Rejection") return assert.fail(`rejected: ${again.reason}`)
    assert.deepStrictEqual([again.events, again.effects], [[], []])
    const denied = thread.decide(state, deny("x1"), ctxOf("deny-1"))
    assert.strictEqual(denied._tag === "Rejection" ? denied.reason : "accepted", "approval-conflict")
    const late = thread.decide(state, timeout(first), timerCtx)
    assert.strictEqual(late._tag === "Rejection" ? late.reason : "accepted", "wait-closed")
  })

  it(`given ${turns.toLocaleString("en-US")} approved calls and a new turn, when its step asks for execute, then the call waits with a deadline timer; approved, its effect is written`, async ({
    signal
  }) => {
    const state = await foldLetting(thread, [...history, newTurn], signal)
    const asked = thread.onOutcome!(
      state,
      stepResponded({ toolCalls: [{ id: "x", name: "execute", arguments: exec.arguments }] }),
      ctxOf(stepOutcomeId)
    )
    if (asked._tag === "Rejection") return assert.fail(`rejected: ${asked.reason}`)
    assert.deepStrictEqual(
      [asked.events, asked.effects, asked.timers],
      [[responded([exec]), requested(exec)], [], [deadlineTimer(exec)]]
    )
    const waiting = asked.events.reduce(thread.evolve, state)
    const approved = thread.decide(waiting, approve("x"), ctxOf("approve-1"))
    if (approved._tag === "Rejection") return assert.fail(`rejected: ${approved.reason}`)
    assert.deepStrictEqual(
      [approved.events, approved.effects.map((e) => e.id), approved.cancelTimers],
      [[closed(exec, "approved")], [exec.effectId], ["wait.approval.x"]]
    )
  })
})

describe("Approval: durations as the operator reads them", () => {
  it("formats and parses", () => {
    assert.strictEqual(Approval.formatDuration(24 * HOUR), "24 h")
    assert.strictEqual(Approval.formatDuration(90 * 60_000), "90 min")
    assert.strictEqual(Approval.formatDuration(1_500), "1500 ms")
    assert.strictEqual(Approval.parseDuration("24h"), 24 * HOUR)
    assert.strictEqual(Approval.parseDuration("30m"), 30 * 60_000)
    assert.strictEqual(Approval.parseDuration("45s"), 45_000)
    assert.strictEqual(Approval.parseDuration("250"), 250)
    assert.strictEqual(Approval.parseDuration("soon"), undefined)
  })
})
