/**
 * Delegate-and-await as a specification: given a thread's events, when a command or an outcome
 * arrives, then these events, effects, cancels and timers (or this rejection). Pure, in milliseconds;
 * time is the DecideContext's `now`, so nothing sleeps.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  CommandId,
  type DecideContext,
  Decision,
  type EffectOutcome,
  type TimerFailure,
  Waits
} from "@orchestration/engine"
import { DEFAULT_DELEGATE_TIMEOUT_MS, delegateMessageId } from "../src/Delegation.js"
import { waitNameOf } from "../src/DelegationEvents.js"
import * as MessageQueue from "../src/MessageQueue.js"
import { type CallRecord, makeThread, type ThreadEvent, type ThreadState } from "../src/Thread.js"

const thread = makeThread()
type Input = Parameters<typeof thread.decide>[1] | EffectOutcome | TimerFailure

const context = (commandId: string, aggregateId = "t1", now = 1_000): DecideContext => ({
  commandId,
  aggregateId,
  now,
  deriveId: (key) => `${commandId}:${key}`
})

/** given(events).decides(input, ctx) → the decision (asserted accepted) or the rejection's reason. */
const given = (events: ReadonlyArray<ThreadEvent>) => {
  const state: ThreadState = events.reduce(thread.evolve, thread.initialState)
  // A timer's failure is decided as the engine does (TimerFailures.ts): no onTimerFailed records nothing.
  const decide = (input: Input, ctx: DecideContext) =>
    "attempt" in input
      ? thread.onOutcome!(state, input as EffectOutcome, ctx)
      : "timerId" in input
        ? (thread.onTimerFailed?.(state, input, ctx) ?? Decision.none<ThreadEvent>())
        : thread.decide(state, input, ctx)
  return {
    state,
    decides: (input: Input, ctx: DecideContext): Decision<ThreadEvent> => {
      const answer = decide(input, ctx)
      if (answer._tag === "Rejection") return assert.fail(`rejected: ${answer.reason}: ${answer.message}`)
      // What was decided folds into the state without surprise.
      answer.events.reduce(thread.evolve, state)
      return answer
    },
    rejects: (input: Input, ctx: DecideContext): string => {
      const answer = decide(input, ctx)
      if (answer._tag !== "Rejection") return assert.fail(`accepted with ${JSON.stringify(answer.events)}`)
      return answer.reason
    }
  }
}

// ---- fixtures ---------------------------------------------------------------------------------

const effectId = "tool:t1:m1:call_1_0"
const delegateCall = (args: Record<string, unknown>): CallRecord => ({
  callId: "call_1_0",
  transcriptId: "call_1_0",
  effectId,
  name: "delegate",
  arguments: { threadId: "helper", text: "summarise", ...args },
  at: 0
})
const awaited = delegateCall({ await: true })
const childMessageId = delegateMessageId(effectId)
const childTurnId = `helper:${childMessageId}`
const waitName = waitNameOf(effectId)
const timerId = Waits.timerIdOf(waitName)

const running: ReadonlyArray<ThreadEvent> = [
  { type: "thread.created", title: null },
  { type: "turn.started", turnId: "t1:m1", ordinal: 1, messageId: "m1", text: "go" }
]
const responded = (c: CallRecord): ThreadEvent => ({
  type: "model.responded",
  turnId: "t1:m1",
  step: 1,
  text: "",
  toolCalls: [c]
})
const delegateOutcome = (response: unknown, status: EffectOutcome["status"] = "succeeded"): EffectOutcome => ({
  effectId,
  kind: "tool.delegate",
  payload: { threadId: "t1", turnId: "t1:m1", callId: "call_1_0" },
  attempt: 1,
  status,
  by: "reactor",
  response
})
const accepted = { awaiting: true, threadId: "helper", turnId: childTurnId }
const deadline = 1_000 + DEFAULT_DELEGATE_TIMEOUT_MS
const awaitingEvent: ThreadEvent = {
  type: "delegate.awaiting",
  turnId: "t1:m1",
  effectId,
  threadId: "helper",
  childTurnId,
  deadline,
  token: "outcome:1"
}
const waiting = [...running, responded(awaited), awaitingEvent]
const answer = (turnStatus: "completed" | "failed" | "interrupted", text: string) => ({
  commandId: "delegate:reply:x",
  type: "delegate.answer" as const,
  threadId: "t1",
  effectId,
  childThreadId: "helper",
  childTurnId,
  turnStatus,
  text
})
const timeout = (token = "outcome:1") => ({
  commandId: `timer:thread:t1:${timerId}#1`,
  type: "delegate.timeout" as const,
  threadId: "t1",
  wait: waitName,
  token
})
const effectsOf = (d: Decision<ThreadEvent>) => d.effects.map((e) => [e.id, e.kind])

// ---- the waiting side -------------------------------------------------------------------------

describe("Delegation spec: the waiting call", () => {
  it("await: false is unchanged: the accepted message is the call's result and the turn goes on", () => {
    const plain = delegateCall({})
    const response = { threadId: "helper", commandId: "delegate:x", messageId: "d-1", sequence: 7 }
    const d = given([...running, responded(plain)]).decides(delegateOutcome(response), context("outcome:1"))
    assert.deepStrictEqual(d.events, [
      {
        type: "tool.result",
        turnId: "t1:m1",
        result: {
          callId: "call_1_0",
          transcriptId: "call_1_0",
          effectId,
          content: JSON.stringify(response),
          outcome: "succeeded"
        }
      }
    ])
    assert.deepStrictEqual(effectsOf(d), [["step:t1:m1#2", "model.step"]])
    assert.strictEqual(d.timers, undefined)
  })

  it("await: false plans its effect without a chain; await: true carries the chain of waiting threads", () => {
    const stepDone: EffectOutcome = {
      effectId: "step:t1:m1#1",
      kind: "model.step",
      payload: { threadId: "t1", turnId: "t1:m1", step: 1 },
      attempt: 1,
      status: "succeeded",
      by: "reactor",
      response: {
        text: "",
        toolCalls: [
          { id: "a", name: "delegate", arguments: { threadId: "x", text: "1" } },
          { id: "b", name: "delegate", arguments: { threadId: "y", text: "2", await: true } }
        ]
      }
    }
    // t1's turn is itself awaited by t0.
    const awaitedTurn: ThreadEvent = {
      type: "delegation.accepted",
      turnId: "t1:m1",
      awaitedBy: { threadId: "t0", turnId: "t0:m0", effectId: "tool:t0:m0:c", chain: ["t0"] }
    }
    const d = given([{ type: "thread.created", title: null }, awaitedTurn, running[1]!]).decides(
      stepDone,
      context("outcome:s")
    )
    const payloads = d.effects.map((e) => (e.payload as { awaitChain?: unknown }).awaitChain)
    assert.deepStrictEqual(payloads, [undefined, ["t0", "t1"]])
  })

  it("an awaited delegate that waited for approval carries its chain when the approval writes its effect", () => {
    const gated = makeThread({ approval: { mode: "required", tools: ["delegate"], timeoutMs: 60_000 } })
    const awaitedTurn: ThreadEvent = {
      type: "delegation.accepted",
      turnId: "t1:m1",
      awaitedBy: { threadId: "t0", turnId: "t0:m0", effectId: "tool:t0:m0:c", chain: ["t0"] }
    }
    const stepDone: EffectOutcome = {
      effectId: "step:t1:m1#1",
      kind: "model.step",
      payload: { threadId: "t1", turnId: "t1:m1", step: 1 },
      attempt: 1,
      status: "succeeded",
      by: "reactor",
      response: { text: "", toolCalls: [{ id: "call_1_0", name: "delegate", arguments: awaited.arguments }] }
    }
    let state = [{ type: "thread.created", title: null } as ThreadEvent, awaitedTurn, running[1]!].reduce(
      gated.evolve,
      gated.initialState
    )
    const planned = gated.onOutcome!(state, stepDone, context("outcome:s"))
    if (planned._tag === "Rejection") return assert.fail(planned.message)
    // Waiting for approval: no effect row yet.
    assert.deepStrictEqual(planned.effects, [])
    state = planned.events.reduce(gated.evolve, state)
    const approved = gated.decide(
      state,
      { commandId: "approve-1", type: "tool.approve", threadId: "t1", callId: "call_1_0" },
      context("approve-1")
    )
    if (approved._tag === "Rejection") return assert.fail(approved.message)
    assert.deepStrictEqual(
      approved.effects.map((e) => [e.id, (e.payload as { awaitChain?: unknown }).awaitChain]),
      [[effectId, ["t0", "t1"]]]
    )
  })

  it("the other thread accepted the message: the call waits, with a deadline timer and no result", () => {
    const d = given([...running, responded(awaited)]).decides(delegateOutcome(accepted), context("outcome:1"))
    assert.deepStrictEqual(d.events, [awaitingEvent])
    assert.deepStrictEqual(d.effects, [])
    assert.deepStrictEqual(d.timers, [
      {
        timerId,
        at: deadline,
        command: { type: "delegate.timeout", threadId: "t1", wait: waitName, token: "outcome:1" }
      }
    ])
  })

  it("the timeout is the call's timeoutSeconds when it names one", () => {
    const d = given([...running, responded(delegateCall({ await: true, timeoutSeconds: 60 }))]).decides(
      delegateOutcome(accepted),
      context("outcome:1")
    )
    assert.deepStrictEqual(
      d.timers?.map((t) => t.at),
      [1_000 + 60_000]
    )
  })

  it("answered: the awaited turn's final text is the call's one result, the timer is cancelled, the turn goes on", () => {
    const d = given(waiting).decides(answer("completed", "the summary"), context("delegate:reply:x"))
    assert.deepStrictEqual(d.events, [
      { type: "delegate.closed", turnId: "t1:m1", effectId, status: "answered" },
      {
        type: "tool.result",
        turnId: "t1:m1",
        result: {
          callId: "call_1_0",
          transcriptId: "call_1_0",
          effectId,
          content: JSON.stringify({ threadId: "helper", status: "completed", text: "the summary" }),
          outcome: "succeeded"
        }
      }
    ])
    assert.deepStrictEqual(effectsOf(d), [["step:t1:m1#2", "model.step"]])
    assert.deepStrictEqual(d.cancelTimers, [timerId])
  })

  it("the awaited turn failed: the call's result is an error naming the thread and why", () => {
    const d = given(waiting).decides(answer("failed", "model step failed: boom"), context("delegate:reply:x"))
    const result = d.events.find((e) => e.type === "tool.result")
    assert.deepStrictEqual(result?.type === "tool.result" && [result.result.outcome, result.result.content], [
      "failed",
      `error: thread 'helper' failed (turn ${childTurnId}): model step failed: boom`
    ])
  })

  it("timed out: the call's result says it timed out, the turn goes on, and the awaited turn is withdrawn", () => {
    const d = given(waiting).decides(timeout(), context(timeout().commandId, "t1", deadline))
    assert.deepStrictEqual(
      d.events.map((e) => e.type),
      ["delegate.closed", "tool.result"]
    )
    const result = d.events[1]!
    assert.isTrue(
      result.type === "tool.result" &&
        result.result.content.startsWith("error: timed out: thread 'helper'") &&
        result.result.content.includes("was withdrawn")
    )
    // Nobody awaits the other thread's turn any more: it is interrupted (or unqueued), not left running.
    assert.deepStrictEqual(effectsOf(d), [
      ["step:t1:m1#2", "model.step"],
      [CommandId.boundedId("withdraw:", effectId), "delegate.withdraw"]
    ])
    assert.deepStrictEqual(d.effects[1]!.payload, {
      threadId: "helper",
      messageId: delegateMessageId(effectId),
      reason: `the call ${effectId} of thread 't1' waiting for it timed out`
    })
  })

  it("race, answer first: the later timeout finds the wait closed and is refused (a stored rejection)", () => {
    const first = given(waiting).decides(answer("completed", "x"), context("delegate:reply:x"))
    assert.strictEqual(
      given([...waiting, ...first.events]).rejects(timeout(), context(timeout().commandId, "t1", deadline)),
      "wait-closed"
    )
  })

  it("race, timeout first: the later answer finds the call answered and is refused", () => {
    const first = given(waiting).decides(timeout(), context(timeout().commandId, "t1", deadline))
    assert.strictEqual(
      given([...waiting, ...first.events]).rejects(answer("completed", "x"), context("delegate:reply:x")),
      "wait-closed"
    )
  })

  it("race, the answer before the delegate's own settlement: it counts, and the settlement is recorded late", () => {
    const early = given([...running, responded(awaited)]).decides(
      answer("completed", "quick"),
      context("delegate:reply:x")
    )
    assert.deepStrictEqual(
      early.events.map((e) => e.type),
      ["tool.result"]
    )
    const late = given([...running, responded(awaited), ...early.events]).decides(
      delegateOutcome(accepted),
      context("outcome:1")
    )
    assert.deepStrictEqual(
      late.events.map((e) => e.type),
      ["effect.late"]
    )
    assert.strictEqual(late.timers, undefined)
  })

  it("answers and timeouts only come from the engine", () => {
    assert.strictEqual(given(waiting).rejects(answer("completed", "x"), context("client-1")), "internal-only")
    assert.strictEqual(given(waiting).rejects(timeout(), context("client-2")), "internal-only")
  })

  it("a stale deadline (an earlier opening's token) is refused", () => {
    assert.strictEqual(
      given(waiting).rejects(timeout("outcome:0"), context(timeout().commandId, "t1", deadline)),
      "wait-closed"
    )
  })

  it("interrupting the waiting turn: the call's synthetic result, the timer cancelled, the awaited turn withdrawn", () => {
    const d = given(waiting).decides(
      { commandId: "stop", type: "turn.interrupt", threadId: "t1", turnId: "t1:m1" },
      context("stop")
    )
    assert.deepStrictEqual(
      d.events.map((e) => e.type),
      ["turn.ended"]
    )
    assert.deepStrictEqual(effectsOf(d), [[CommandId.boundedId("withdraw:", effectId), "delegate.withdraw"]])
    assert.deepStrictEqual(d.effects[0]!.payload, {
      threadId: "helper",
      messageId: childMessageId,
      reason: "the waiting turn t1:m1 of thread 't1' ended (interrupted by the user)"
    })
    assert.deepStrictEqual(d.cancelTimers, [timerId])
    // The turn's end closed its wait: a late answer is refused.
    assert.strictEqual(
      given([...waiting, ...d.events]).rejects(answer("completed", "x"), context("delegate:reply:x")),
      "wait-closed"
    )
  })

  it("deleting the waiting thread withdraws the awaited turn too", () => {
    const d = given(waiting).decides({ commandId: "del", type: "thread.delete", threadId: "t1" }, context("del"))
    assert.deepStrictEqual(
      d.events.map((e) => e.type),
      ["turn.ended", "thread.deleted"]
    )
    assert.deepStrictEqual(effectsOf(d), [
      ["cleanup:t1", "thread.cleanup"],
      [CommandId.boundedId("withdraw:", effectId), "delegate.withdraw"]
    ])
  })

  it("the deadline's timer can never fire: the waiting turn ends failed naming it, and the awaited turn is withdrawn", () => {
    const failure: TimerFailure = {
      timerId,
      generation: 1,
      at: deadline,
      command: null,
      reason: "invalid-command",
      message: "invalid 'delegate.timeout' command"
    }
    const d = given(waiting).decides(failure, context(`timer:thread:t1:${timerId}#1:failed`, "t1", deadline + 1))
    const reason = "the deadline of call 'call_1_0' awaiting thread 'helper' could not fire (invalid-command)"
    assert.deepStrictEqual(d.events, [
      {
        type: "turn.timer-failed",
        turnId: "t1:m1",
        wait: "delegate",
        transcriptId: "call_1_0",
        timerId,
        at: deadline,
        reason: "invalid-command",
        message: "invalid 'delegate.timeout' command"
      },
      {
        type: "turn.ended",
        turnId: "t1:m1",
        status: "failed",
        reason,
        synthetic: [
          {
            callId: "call_1_0",
            transcriptId: "call_1_0",
            effectId,
            content: `failed: the turn failed before this call finished (${reason})`,
            outcome: "failed"
          }
        ]
      }
    ])
    // Nobody awaits the other thread's turn any more: it is withdrawn, not left running for no one.
    assert.deepStrictEqual(effectsOf(d), [[CommandId.boundedId("withdraw:", effectId), "delegate.withdraw"]])
    assert.deepStrictEqual(d.effects[0]!.payload, {
      threadId: "helper",
      messageId: childMessageId,
      reason: `the waiting turn t1:m1 of thread 't1' ended (${reason})`
    })
    // The ended turn's wait is gone: the answer that comes late is refused.
    assert.strictEqual(
      given([...waiting, ...d.events]).rejects(answer("completed", "x"), context("delegate:reply:x")),
      "wait-closed"
    )
  })

  it("a failure of a deadline whose wait closed already, or of another opening, changes nothing", () => {
    const failure: TimerFailure = {
      timerId,
      generation: 1,
      at: deadline,
      command: null,
      reason: "unreadable",
      message: "not JSON"
    }
    const answered = given(waiting).decides(answer("completed", "x"), context("delegate:reply:x"))
    const after = given([...waiting, ...answered.events]).decides(failure, context("told", "t1", deadline))
    assert.deepStrictEqual([after.events, after.effects], [[], []])
    const stale = given(waiting).decides({ ...failure, at: deadline - 5 }, context("told", "t1", deadline))
    assert.deepStrictEqual([stale.events, stale.effects], [[], []])
  })

  it("a timer of a wait whose turn ended finds no wait and is refused", () => {
    const ended = given(waiting).decides(
      { commandId: "stop", type: "turn.interrupt", threadId: "t1", turnId: "t1:m1" },
      context("stop")
    )
    assert.strictEqual(
      given([...waiting, ...ended.events]).rejects(timeout(), context(timeout().commandId, "t1", deadline)),
      "wait-unknown"
    )
  })
})

// ---- the awaited side ------------------------------------------------------------------------

const awaitedBy = { threadId: "t1", turnId: "t1:m1", effectId, chain: ["t1"] }
const childCtx = (commandId: string) => context(commandId, "helper")
const childSend = (chain: ReadonlyArray<string> = ["t1"]) => ({
  commandId: `delegate:${effectId}`,
  type: "message.send" as const,
  threadId: "helper",
  messageId: childMessageId,
  text: "summarise",
  awaitedBy: { ...awaitedBy, chain }
})
/** The waiting thread's withdraw of the awaited message, as its delegate.withdraw row sends it. */
const withdrawCommand = (reason: string) => ({
  commandId: "delegate:withdraw:x",
  type: "delegation.withdraw" as const,
  threadId: "helper",
  messageId: childMessageId,
  reason
})
const childRunning: ReadonlyArray<ThreadEvent> = [
  { type: "thread.created", title: null },
  { type: "delegation.accepted", turnId: childTurnId, awaitedBy },
  { type: "turn.started", turnId: childTurnId, ordinal: 1, messageId: childMessageId, text: "summarise" }
]

describe("Delegation spec: the awaited thread", () => {
  it("an awaited message starts its turn and records whom its end is owed to", () => {
    const d = given([]).decides(childSend(), childCtx(childSend().commandId))
    assert.deepStrictEqual(
      d.events.map((e) => e.type),
      ["thread.created", "turn.started", "delegation.accepted"]
    )
  })

  it("a cycle is refused: a thread already waiting above cannot be awaited", () => {
    assert.strictEqual(
      given([]).rejects(childSend(["helper", "t1"]), childCtx(childSend().commandId)),
      "delegation-cycle"
    )
  })

  it("a client cannot claim a message is awaited", () => {
    assert.strictEqual(given([]).rejects(childSend(), childCtx("client-1")), "internal-only")
  })

  it("its turn completes: a reply carries the final text to the waiting call", () => {
    const done: EffectOutcome = {
      effectId: `step:${childTurnId}#1`,
      kind: "model.step",
      payload: { threadId: "helper", turnId: childTurnId, step: 1 },
      attempt: 1,
      status: "succeeded",
      by: "reactor",
      response: { text: "the summary", toolCalls: [] }
    }
    const d = given(childRunning).decides(done, childCtx("outcome:c"))
    assert.deepStrictEqual(effectsOf(d), [[CommandId.boundedId("reply:", childTurnId), "delegate.reply"]])
    assert.deepStrictEqual(d.effects[0]!.payload, {
      threadId: "t1",
      effectId,
      childThreadId: "helper",
      childTurnId,
      turnStatus: "completed",
      text: "the summary"
    })
  })

  it("withdrawn while running: the turn is interrupted with the reason, and no reply is owed", () => {
    const withdraw = withdrawCommand("the waiting turn ended")
    const d = given(childRunning).decides(withdraw, childCtx(withdraw.commandId))
    const ended = d.events[0]!
    assert.deepStrictEqual(ended.type === "turn.ended" && [ended.status, ended.reason], [
      "interrupted",
      "the waiting turn ended"
    ])
    assert.deepStrictEqual(effectsOf(d), [])
  })

  it("the awaited thread is deleted with the awaited message still queued: the waiting call hears it at once", () => {
    const queuedChild: ReadonlyArray<ThreadEvent> = [
      { type: "thread.created", title: null },
      { type: "turn.started", turnId: "helper:busy", ordinal: 1, messageId: "busy", text: "busy" },
      { type: "message.queued", messageId: childMessageId, turnId: childTurnId, text: "summarise" },
      { type: "delegation.accepted", turnId: childTurnId, awaitedBy }
    ]
    const d = given(queuedChild).decides(
      { commandId: "del", type: "thread.delete", threadId: "helper" },
      childCtx("del")
    )
    const reply = d.effects.find((e) => e.kind === "delegate.reply")
    assert.deepStrictEqual(reply?.payload, {
      threadId: "t1",
      effectId,
      childThreadId: "helper",
      childTurnId,
      turnStatus: "failed",
      text: "thread deleted"
    })
  })

  it("withdrawn while queued: the message leaves the queue and never runs", () => {
    const queuedChild: ReadonlyArray<ThreadEvent> = [
      { type: "thread.created", title: null },
      { type: "turn.started", turnId: "helper:busy", ordinal: 1, messageId: "busy", text: "busy" },
      { type: "message.queued", messageId: childMessageId, turnId: childTurnId, text: "summarise" },
      { type: "delegation.accepted", turnId: childTurnId, awaitedBy }
    ]
    const withdraw = withdrawCommand("gone")
    const spec = given(queuedChild)
    const d = spec.decides(withdraw, childCtx(withdraw.commandId))
    assert.deepStrictEqual(d.events, [
      { type: "delegation.withdrawn", turnId: childTurnId, messageId: childMessageId, reason: "gone" }
    ])
    const after = d.events.reduce(thread.evolve, spec.state)
    assert.deepStrictEqual(MessageQueue.toArray(after.queue), [])
    assert.deepStrictEqual(after.delegation.awaitedBy, {})
  })

  it("withdrawn before it arrived (its delegate was cut off mid-send): the message, when it comes, is refused and never runs", () => {
    const withdraw = withdrawCommand("the waiting turn ended")
    const idle: ReadonlyArray<ThreadEvent> = [{ type: "thread.created", title: null }]
    const spec = given(idle)
    const d = spec.decides(withdraw, childCtx(withdraw.commandId))
    const after = d.events.reduce(thread.evolve, spec.state)
    assert.strictEqual(
      given([...idle, ...d.events]).rejects(childSend(), childCtx(childSend().commandId)),
      "delegation-withdrawn"
    )
    // Another awaited message of the same waiting thread is not affected.
    assert.deepStrictEqual(after.queue, spec.state.queue)
    const other = { ...childSend(), commandId: "delegate:tool:t1:m2:call_1_0", messageId: "d-other" }
    given([...idle, ...d.events]).decides(other, childCtx(other.commandId))
  })

  it("a reply whose row failed (the store refused it at every try) is sent again as a new row, at most three times", () => {
    const payload = {
      threadId: "t1",
      effectId,
      childThreadId: "helper",
      childTurnId,
      turnStatus: "completed" as const,
      text: "the summary"
    }
    const failedReply = (resend?: number): EffectOutcome => ({
      effectId: "reply:x",
      kind: "delegate.reply",
      payload: resend === undefined ? payload : { ...payload, resend },
      attempt: 5,
      status: "failed",
      by: "reactor",
      error: { message: "delegate.answer not recorded: disk I/O error", reason: "storage" }
    })
    const first = given(childRunning).decides(failedReply(), childCtx("outcome:r1"))
    assert.deepStrictEqual(first.events, [])
    assert.deepStrictEqual(
      first.effects.map((e) => [e.kind, e.lane === e.id, e.payload]),
      [["delegate.reply", true, { ...payload, resend: 1 }]]
    )
    const third = given(childRunning).decides(failedReply(2), childCtx("outcome:r3"))
    assert.deepStrictEqual(
      third.effects.map((e) => (e.payload as { resend: number }).resend),
      [3]
    )
    assert.deepStrictEqual(given(childRunning).decides(failedReply(3), childCtx("outcome:r4")).effects, [])
    // Delivered, or answered by a refusal: nothing more.
    const delivered = { ...failedReply(), status: "succeeded" as const, response: { delivered: false } }
    assert.deepStrictEqual(given(childRunning).decides(delivered, childCtx("outcome:ok")).effects, [])
  })

  it("a withdraw whose row failed is sent again as a new row, at most three times", () => {
    const payload = { threadId: "helper", messageId: "d-1", reason: "the waiting turn ended" }
    const failedWithdraw = (resend?: number): EffectOutcome => ({
      effectId: "withdraw:x",
      kind: "delegate.withdraw",
      payload: resend === undefined ? payload : { ...payload, resend },
      attempt: 5,
      status: "failed",
      by: "reactor",
      error: { message: "delegation.withdraw not recorded: disk I/O error", reason: "storage" }
    })
    const idle: ReadonlyArray<ThreadEvent> = [{ type: "thread.created", title: null }]
    const first = given(idle).decides(failedWithdraw(), context("outcome:w1"))
    assert.deepStrictEqual(first.events, [])
    assert.deepStrictEqual(
      first.effects.map((e) => [e.kind, e.lane === e.id, e.payload]),
      [["delegate.withdraw", true, { ...payload, resend: 1 }]]
    )
    assert.deepStrictEqual(
      given(idle)
        .decides(failedWithdraw(2), context("outcome:w3"))
        .effects.map((e) => (e.payload as { resend: number }).resend),
      [3]
    )
    assert.deepStrictEqual(given(idle).decides(failedWithdraw(3), context("outcome:w4")).effects, [])
    const delivered = { ...failedWithdraw(), status: "succeeded" as const, response: { delivered: true } }
    assert.deepStrictEqual(given(idle).decides(delivered, context("outcome:ok")).effects, [])
  })
})
