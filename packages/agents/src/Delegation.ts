/**
 * Delegate-and-await: a `delegate` call with `await: true` keeps its call open until the other
 * thread's turn for that message ends, and its one result is that turn's final text (or why it
 * failed, was interrupted or timed out). Pure, like the rest of the decider.
 *
 * Why the call stays open in the thread's state and not in a running effect row: a row running for
 * up to 30 minutes would hold a lease, block the thread's lane (its own interrupt's effects queue
 * behind it) and, as process-bound work, be answered "interrupted" by any restart. Instead the
 * `tool.delegate` row settles as soon as the other thread accepted the message (a durable command,
 * so a replay is a duplicate), and the call is held by a wait (Waits.ts) with a durable deadline
 * timer. The call has no result while it waits (the transcript shows it open, like a running call);
 * exactly one of these gives it its result, each in one decision of this aggregate, so they race
 * safely and the loser gets a stored rejection:
 *   - `delegate.answer`, sent by the awaited thread's `delegate.reply` effect when its turn ends;
 *   - `delegate.timeout`, the deadline timer's command, which also withdraws the awaited turn;
 *   - the end of the waiting turn (interrupt, failure, delete): its synthetic result, and a
 *     `delegate.withdraw` effect that interrupts (or unqueues) the awaited turn, recursively.
 * Nothing waits in memory: every hop is a committed row and a command with a deterministic id.
 *
 * Cycles: each awaited message carries the chain of threads waiting above it; a thread that finds
 * itself in the chain refuses the message, and the waiting call's result says why.
 */
import {
  Aggregate,
  CommandId,
  Decision,
  type DecideContext,
  type EffectIntent,
  type EffectOutcome,
  Waits
} from "@orchestration/engine"
import { Option, Schema } from "effect"
import { createHash } from "node:crypto"
import { type AwaitedBy, waitNameOf } from "./DelegationEvents.js"
import * as MessageQueue from "./MessageQueue.js"
import { ToolCallPayload } from "./ToolCallPlanning.js"
import {
  type ActiveTurn,
  type CallRecord,
  MessageId,
  ThreadId,
  type ThreadEvent,
  type ThreadState,
  turnIdOf
} from "./ThreadEvents.js"

export { AwaitedBy } from "./DelegationEvents.js"

type Rejection = Aggregate.Rejection

/** How long an awaited delegate waits when its call names no `timeoutSeconds`. */
export const DEFAULT_DELEGATE_TIMEOUT_MS = 30 * 60_000

/** The message id a delegate sends under: derived from its call's effect id, so a replay is a duplicate. */
export const delegateMessageId = (effectId: string) =>
  `d-${createHash("sha256").update(effectId).digest("hex").slice(0, 40)}`

/** The id of the command a delegation effect sends: only the engine may use the `delegate:` prefix. */
export const delegationCommandId = (effectId: string) => CommandId.boundedId("delegate:", effectId)

const replyEffectId = (turnId: string) => CommandId.boundedId("reply:", turnId)
const withdrawEffectId = (callEffectId: string) => CommandId.boundedId("withdraw:", callEffectId)

/**
 * The payload of a `delegate.reply` row: the `delegate.answer` it sends, but for its id and type. Its
 * shape only: what the command refuses (a thread id it does not allow) is that command's answer.
 */
export const DelegateReplyPayload = Schema.Struct({
  threadId: Schema.String,
  effectId: Schema.String,
  childThreadId: Schema.String,
  childTurnId: Schema.String,
  turnStatus: Schema.Literal("completed", "failed", "interrupted"),
  text: Schema.String,
  /** Absent on a turn's reply; n on its n-th resend (see resend). */
  resend: Schema.optional(Schema.Number)
})
export type DelegateReplyPayload = typeof DelegateReplyPayload.Type
const decodeReply = Schema.decodeUnknownOption(DelegateReplyPayload)

/** How many times a reply or a withdraw whose row failed is sent again, each a new row with its own tries. */
export const replyResends = 3

/**
 * The payload of a `delegate.withdraw` row: the `delegation.withdraw` it sends, but for its id and type.
 * Its shape only: a withdraw may name the thread the model asked for, which that command may refuse.
 */
export const DelegateWithdrawPayload = Schema.Struct({
  threadId: Schema.String,
  messageId: Schema.String,
  reason: Schema.String,
  /** Absent on a call's withdraw; n on its n-th resend (see resend). */
  resend: Schema.optional(Schema.Number)
})
export type DelegateWithdrawPayload = typeof DelegateWithdrawPayload.Type
const decodeWithdraw = Schema.decodeUnknownOption(DelegateWithdrawPayload)

/** The payload of a `tool.delegate` row: the call, and for an awaited one the threads waiting above it. */
export const DelegateCallPayload = Schema.Struct({
  ...ToolCallPayload.fields,
  awaitChain: Schema.optional(Schema.Array(Schema.String))
})
export type DelegateCallPayload = typeof DelegateCallPayload.Type
const decodeDelegateCall = Schema.decodeUnknownOption(DelegateCallPayload)

export const delegationCommands = {
  "delegate.answer": Aggregate.command("delegate.answer", {
    threadId: ThreadId,
    /** The waiting call's effect id. */
    effectId: Schema.String,
    childThreadId: Schema.String,
    childTurnId: Schema.String,
    /** How the awaited turn ended (not `status`, so a command is never mistaken for an outcome). */
    turnStatus: DelegateReplyPayload.fields.turnStatus,
    /** The awaited turn's final text, or the reason it failed or was interrupted. */
    text: Schema.String
  }),
  "delegate.timeout": Aggregate.command("delegate.timeout", {
    threadId: ThreadId,
    wait: Schema.String,
    token: Schema.String
  }),
  "delegation.withdraw": Aggregate.command("delegation.withdraw", {
    threadId: ThreadId,
    messageId: MessageId,
    reason: Schema.String
  })
} as const

export type DelegationCommand = {
  [K in keyof typeof delegationCommands]: Schema.Schema.Type<(typeof delegationCommands)[K]>
}[keyof typeof delegationCommands]

export const isDelegationCommand = (command: { readonly type: string }): command is DelegationCommand =>
  command.type in delegationCommands

/** What delegation needs from the thread's own decider. */
export interface ThreadCore {
  /** The thread's own onOutcome, given an outcome for one of its calls. */
  readonly onOutcome: (
    state: ThreadState,
    outcome: EffectOutcome,
    ctx: DecideContext
  ) => Decision<ThreadEvent> | Rejection
  /** Ends the active turn as interrupted with this reason. */
  readonly interrupt: (
    state: ThreadState,
    active: ActiveTurn,
    threadId: string,
    reason: string
  ) => Decision<ThreadEvent>
  readonly timeoutMs: number
}

interface DelegateArguments {
  readonly threadId?: unknown
  readonly await?: unknown
  readonly timeoutSeconds?: unknown
}

const args = (call: { readonly arguments: unknown }) => (call.arguments ?? {}) as DelegateArguments

const isAwaitedDelegate = (call: CallRecord) => call.name === "delegate" && args(call).await === true

const openCall = (state: ThreadState, effectId: string) => {
  const active = state.active
  const call = active?.calls.find((c) => c.effectId === effectId)
  return active === null || call === undefined || active.answered.includes(call.transcriptId)
    ? undefined
    : { active, call }
}

const internalOnly = (ctx: DecideContext, prefix: string, what: string): Rejection | undefined =>
  ctx.commandId.startsWith(prefix) ? undefined : Decision.reject("internal-only", `${what} is sent only by the engine`)

// ---- the awaited (child) side ---------------------------------------------------------------

/** A message.send that names a waiting call: refused when forged, withdrawn already, or closing a cycle. */
export const refuseAwaited = (
  state: ThreadState,
  command: { readonly type: string; readonly messageId?: string; readonly awaitedBy?: AwaitedBy | undefined },
  ctx: DecideContext
): Rejection | undefined => {
  if (command.type !== "message.send" || command.awaitedBy === undefined) return undefined
  const forged = internalOnly(ctx, "delegate:", "a message awaited by another thread")
  if (forged !== undefined) return forged
  if (command.messageId !== undefined && state.delegation.withdrawnEarly.includes(command.messageId)) {
    return Decision.reject(
      "delegation-withdrawn",
      `the turn of thread '${command.awaitedBy.threadId}' waiting for this message ended before it arrived: nobody awaits it`
    )
  }
  const chain = command.awaitedBy.chain
  if (chain.includes(ctx.aggregateId)) {
    return Decision.reject(
      "delegation-cycle",
      `thread '${ctx.aggregateId}' is itself waiting for this delegation (${[...chain, ctx.aggregateId].join(" → ")}): ` +
        "awaiting it would wait forever; delegate without await, or answer from this thread"
    )
  }
  return undefined
}

/** An accepted awaited message records whom its turn's end is owed to. */
const acceptAwaited = (
  command: { readonly type: string; readonly messageId?: string; readonly awaitedBy?: AwaitedBy | undefined },
  ctx: DecideContext,
  decision: Decision<ThreadEvent>
): Decision<ThreadEvent> =>
  command.type !== "message.send" || command.awaitedBy === undefined || command.messageId === undefined
    ? decision
    : {
        ...decision,
        events: [
          ...decision.events,
          {
            type: "delegation.accepted",
            turnId: turnIdOf(ctx.aggregateId, command.messageId),
            awaitedBy: command.awaitedBy
          }
        ]
      }

const reply = (
  ctx: DecideContext,
  turnId: string,
  awaitedBy: AwaitedBy,
  turnStatus: "completed" | "failed" | "interrupted",
  text: string
): EffectIntent => ({
  id: replyEffectId(turnId),
  kind: "delegate.reply",
  // A lane of its own: in the thread's lane it would wait behind the thread's next turn's model step
  // (or a row held there), while the waiting call's deadline runs.
  lane: replyEffectId(turnId),
  payload: {
    threadId: awaitedBy.threadId,
    effectId: awaitedBy.effectId,
    childThreadId: ctx.aggregateId,
    childTurnId: turnId,
    turnStatus,
    text
  } satisfies DelegateReplyPayload
})

// ---- after every decision: replies owed, children to withdraw, chains to carry -------------

/** The effect that interrupts (or unqueues) the turn a call awaited, once nobody awaits it. */
const withdraw = (callEffectId: string, childThreadId: string, reason: string): EffectIntent => ({
  id: withdrawEffectId(callEffectId),
  kind: "delegate.withdraw",
  // A lane of its own, as a reply's: the awaited turn stops now, not after this thread's next step.
  lane: withdrawEffectId(callEffectId),
  payload: {
    threadId: childThreadId,
    messageId: delegateMessageId(callEffectId),
    reason
  } satisfies DelegateWithdrawPayload
})

/**
 * What delegation adds to a decision of the thread's own decider: a reply for each awaited turn it
 * ends, a withdraw (and the deadline's cancel) for each waiting call of a turn it ends early, and the
 * chain of waiting threads on each awaited delegate it plans.
 */
export const afterDecision = (
  state: ThreadState,
  ctx: DecideContext,
  decision: Decision<ThreadEvent>
): Decision<ThreadEvent> => {
  const owed = state.delegation.awaitedBy
  const effects: Array<EffectIntent> = []
  const cancelTimers: Array<string> = []
  const replied = new Set<string>()
  for (const event of decision.events) {
    if (event.type === "turn.completed" || event.type === "turn.ended") {
      const awaitedBy = owed[event.turnId]
      if (awaitedBy !== undefined) {
        replied.add(event.turnId)
        effects.push(
          event.type === "turn.completed"
            ? reply(ctx, event.turnId, awaitedBy, "completed", event.text)
            : reply(ctx, event.turnId, awaitedBy, event.status, event.reason)
        )
      }
      const active = state.active
      if (event.type === "turn.ended" && active !== null && active.turnId === event.turnId) {
        const unanswered = new Set(event.synthetic.map((r) => r.effectId))
        for (const call of active.calls.filter((c) => unanswered.has(c.effectId) && isAwaitedDelegate(c))) {
          const waiting = state.delegation.awaiting[call.effectId]
          if (waiting !== undefined) cancelTimers.push(Waits.timerIdOf(waitNameOf(call.effectId)))
          const childThreadId = waiting?.threadId ?? String(args(call).threadId ?? "")
          effects.push(
            withdraw(
              call.effectId,
              childThreadId,
              `the waiting turn ${active.turnId} of thread '${ctx.aggregateId}' ended (${event.reason})`
            )
          )
        }
      }
    }
    if (event.type === "thread.deleted") {
      // Queued awaited messages never run now: their waiting calls hear it at once.
      for (const [turnId, awaitedBy] of Object.entries(owed)) {
        if (!replied.has(turnId)) effects.push(reply(ctx, turnId, awaitedBy, "failed", "thread deleted"))
      }
    }
  }
  const chained = decision.effects.map((effect) => {
    if (effect.kind !== "tool.delegate") return effect
    // Planned in this decision (ToolCallPlanning), or written now from a stored approval.requested
    // event (ApprovalDecisions.ts), whose payload no schema checked: decoded, as its handler will.
    // One that does not decode is written as stored, unchained: its handler fails it unperformed
    // (payload-undecodable) and the call's result says why, as for any damaged row.
    const decoded = decodeDelegateCall(effect.payload)
    if (Option.isNone(decoded)) return effect
    const payload = decoded.value
    if (args(payload).await !== true) return effect
    const above = owed[payload.turnId]?.chain ?? []
    const chained: DelegateCallPayload = { ...payload, awaitChain: [...above, ctx.aggregateId] }
    return { ...effect, payload: chained }
  })
  if (effects.length === 0 && cancelTimers.length === 0 && chained.every((e, i) => e === decision.effects[i])) {
    return decision
  }
  return Decision.of<ThreadEvent>({
    events: decision.events,
    effects: [...chained, ...effects],
    cancel: decision.cancel,
    ...(decision.timers === undefined ? {} : { timers: decision.timers }),
    cancelTimers: [...(decision.cancelTimers ?? []), ...cancelTimers]
  })
}

/** The thread's own decision for a command, with what delegation adds to it. */
export const aroundDecide = (
  state: ThreadState,
  command: { readonly type: string; readonly messageId?: string; readonly awaitedBy?: AwaitedBy | undefined },
  ctx: DecideContext,
  decision: Decision<ThreadEvent> | Rejection
): Decision<ThreadEvent> | Rejection =>
  decision._tag === "Rejection" ? decision : afterDecision(state, ctx, acceptAwaited(command, ctx, decision))

// ---- outcomes -------------------------------------------------------------------------------

/**
 * Outcomes delegation owns: its own reply and withdraw rows (settled: nothing to record), and an
 * awaited delegate the other thread accepted, whose call now waits. Anything else is the thread's.
 */
export const onDelegationOutcome = (
  state: ThreadState,
  outcome: EffectOutcome,
  ctx: DecideContext,
  core: ThreadCore
): Decision<ThreadEvent> | Rejection | undefined => {
  if (outcome.kind === "delegate.reply" || outcome.kind === "delegate.withdraw") {
    return outcome.status === "failed" ? resend(outcome) : Decision.none()
  }
  if (outcome.kind !== "tool.delegate" || outcome.status !== "succeeded") return undefined
  const response = outcome.response as { awaiting?: unknown; threadId?: string; turnId?: string } | undefined
  if (response?.awaiting !== true) return undefined
  const open = openCall(state, outcome.effectId)
  // Answered already (the other turn was quicker than this settlement): the thread records it late.
  if (open === undefined || state.delegation.awaiting[outcome.effectId] !== undefined) return undefined
  const seconds = args(open.call).timeoutSeconds
  const deadline = ctx.now + (typeof seconds === "number" ? seconds * 1000 : core.timeoutMs)
  const opened = Waits.open(state.delegation.waits, {
    name: waitNameOf(outcome.effectId),
    deadline,
    token: ctx.commandId,
    timeout: { type: "delegate.timeout", threadId: ctx.aggregateId }
  })
  if (Waits.isRejection(opened)) return Decision.none()
  return Decision.of<ThreadEvent>({
    events: [
      {
        type: "delegate.awaiting",
        turnId: open.active.turnId,
        effectId: outcome.effectId,
        threadId: response.threadId ?? "",
        childTurnId: response.turnId ?? "",
        deadline,
        token: ctx.commandId
      }
    ],
    timers: opened.timers
  })
}

/**
 * A reply's or a withdraw's row failed: the store refused its command at every try (a refusal by the
 * other thread is an answer, and settles the row). Left so, a reply's waiting call would wait for its
 * deadline (30 minutes by default) and then say the other thread never answered, and a withdrawn turn
 * would run on (model calls, tools) for a caller that is gone. So the command is sent again as a new
 * row, with its own tries, up to `replyResends` times. A duplicate is harmless: a second answer is
 * refused by the waiting call's thread (`wait-closed`), a second withdraw finds the turn ended.
 */
const resend = (outcome: EffectOutcome): Decision<ThreadEvent> => {
  if (outcome.kind === "delegate.reply") {
    const decoded = decodeReply(outcome.payload)
    return Option.isNone(decoded)
      ? Decision.none()
      : resendRow("delegate.reply", "reply:", decoded.value.childTurnId, decoded.value)
  }
  const decoded = decodeWithdraw(outcome.payload)
  return Option.isNone(decoded)
    ? Decision.none()
    : resendRow("delegate.withdraw", "withdraw:", decoded.value.messageId, decoded.value)
}

/** The next row of a reply or withdraw (its payload's `resend` counted up), or nothing past `replyResends`. */
const resendRow = (
  kind: "delegate.reply" | "delegate.withdraw",
  prefix: string,
  key: string,
  payload: { readonly resend?: number | undefined }
): Decision<ThreadEvent> => {
  const resend = (payload.resend ?? 0) + 1
  if (resend > replyResends) return Decision.none()
  const id = CommandId.boundedId(prefix, `${key}#resend-${resend}`)
  return Decision.of<ThreadEvent>({ events: [], effects: [{ id, kind, lane: id, payload: { ...payload, resend } }] })
}

// ---- commands -------------------------------------------------------------------------------

/** The call's result as the outcome of its effect, so the thread records it and goes on as for any tool. */
const resultOutcome = (
  active: ActiveTurn,
  call: CallRecord,
  result: Pick<EffectOutcome, "status" | "response" | "error">
): EffectOutcome => ({
  effectId: call.effectId,
  kind: "tool.delegate",
  payload: { threadId: "", turnId: active.turnId, callId: call.callId, name: call.name, arguments: call.arguments },
  attempt: 1,
  by: "reactor",
  ...result
})

/** The thread's decision for the call's result, after the wait's closing events. */
const closeWith = (
  state: ThreadState,
  ctx: DecideContext,
  core: ThreadCore,
  closing: ReadonlyArray<ThreadEvent>,
  cancelTimers: ReadonlyArray<string>,
  outcome: EffectOutcome
): Decision<ThreadEvent> | Rejection => {
  const decided = core.onOutcome(state, outcome, ctx)
  if (decided._tag === "Rejection") return decided
  const after = afterDecision(state, ctx, decided)
  return Decision.of<ThreadEvent>({
    events: [...closing, ...after.events],
    effects: after.effects,
    cancel: after.cancel,
    ...(after.timers === undefined ? {} : { timers: after.timers }),
    cancelTimers: [...cancelTimers, ...(after.cancelTimers ?? [])]
  })
}

export const decideDelegation = (
  state: ThreadState,
  command: DelegationCommand,
  ctx: DecideContext,
  core: ThreadCore
): Decision<ThreadEvent> | Rejection => {
  switch (command.type) {
    case "delegate.answer": {
      const forged = internalOnly(ctx, "delegate:", "delegate.answer")
      if (forged !== undefined) return forged
      const open = openCall(state, command.effectId)
      if (open === undefined) {
        return Decision.reject("wait-closed", `the call ${command.effectId} already has its result`)
      }
      const name = waitNameOf(command.effectId)
      // The answer may land before the delegate's own settlement opened the wait: the call is open, so it counts.
      let cancelTimers: ReadonlyArray<string> = []
      let closing: ReadonlyArray<ThreadEvent> = []
      if (Waits.get(state.delegation.waits, name) !== undefined) {
        const answered = Waits.answer(state.delegation.waits, name)
        if (Waits.isRejection(answered)) return answered
        cancelTimers = answered.cancelTimers
        closing = [
          { type: "delegate.closed", turnId: open.active.turnId, effectId: command.effectId, status: "answered" }
        ]
      }
      const outcome = resultOutcome(
        open.active,
        open.call,
        command.turnStatus === "completed"
          ? {
              status: "succeeded",
              response: { threadId: command.childThreadId, status: "completed", text: command.text }
            }
          : {
              status: "failed",
              error: {
                message: `thread '${command.childThreadId}' ${command.turnStatus === "failed" ? "failed" : "was interrupted"} (turn ${command.childTurnId}): ${command.text}`,
                reason: "handler"
              }
            }
      )
      return closeWith(state, ctx, core, closing, cancelTimers, outcome)
    }
    case "delegate.timeout": {
      const forged = internalOnly(ctx, "timer:", "delegate.timeout")
      if (forged !== undefined) return forged
      const timedOut = Waits.timeout(state.delegation.waits, command.wait, command.token)
      if (Waits.isRejection(timedOut)) return timedOut
      const entry = Object.entries(state.delegation.awaiting).find(
        ([effectId]) => waitNameOf(effectId) === command.wait
      )
      const open = entry === undefined ? undefined : openCall(state, entry[0])
      if (entry === undefined || open === undefined) {
        return Decision.reject("wait-closed", `wait '${command.wait}' has no open call`)
      }
      const [effectId, waiting] = entry
      const deadline = Waits.get(state.delegation.waits, command.wait)!.deadline
      const outcome = resultOutcome(open.active, open.call, {
        status: "failed",
        error: {
          message:
            `timed out: thread '${waiting.threadId}' did not answer by ${new Date(deadline).toISOString()}; ` +
            `its turn ${waiting.childTurnId} was withdrawn (interrupted, or unqueued if it had not started)`,
          reason: "timeout"
        }
      })
      const closing: ReadonlyArray<ThreadEvent> = [
        { type: "delegate.closed", turnId: open.active.turnId, effectId, status: "timed-out" }
      ]
      const closed = closeWith(state, ctx, core, closing, [], outcome)
      if (closed._tag === "Rejection") return closed
      // Nobody awaits that turn now: left running, it would spend model calls and tools for no one.
      const reason = `the call ${effectId} of thread '${ctx.aggregateId}' waiting for it timed out`
      return Decision.of<ThreadEvent>({
        events: closed.events,
        effects: [...closed.effects, withdraw(effectId, waiting.threadId, reason)],
        cancel: closed.cancel,
        ...(closed.timers === undefined ? {} : { timers: closed.timers }),
        cancelTimers: closed.cancelTimers ?? []
      })
    }
    case "delegation.withdraw": {
      const forged = internalOnly(ctx, "delegate:", "delegation.withdraw")
      if (forged !== undefined) return forged
      const turnId = turnIdOf(ctx.aggregateId, command.messageId)
      // The waiting call has its result already: the awaited turn owes no reply.
      const unowed: ThreadState = {
        ...state,
        delegation: {
          ...state.delegation,
          awaitedBy: Object.fromEntries(Object.entries(state.delegation.awaitedBy).filter(([t]) => t !== turnId))
        }
      }
      if (state.active !== null && state.active.turnId === turnId) {
        return afterDecision(unowed, ctx, core.interrupt(state, state.active, ctx.aggregateId, command.reason))
      }
      if (MessageQueue.has(state.queue, command.messageId)) {
        return Decision.of<ThreadEvent>({
          events: [{ type: "delegation.withdrawn", turnId, messageId: command.messageId, reason: command.reason }]
        })
      }
      // Not (or no longer) here: it ended already, or has not arrived yet (its delegate was cut off
      // mid-send and may still deliver it). Remembered, so that it is refused if it comes.
      return Decision.of<ThreadEvent>({
        events: [
          { type: "delegation.withdrawn", turnId, messageId: command.messageId, reason: command.reason, early: true }
        ]
      })
    }
  }
}
