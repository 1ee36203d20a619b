/**
 * The Thread aggregate: messages and turns, where a turn is a loop run entirely through the outbox.
 *
 *   message.send → turn.started + effect model.step (step:<turnId>#1)
 *   model.step settles → model.responded + one effect per tool call (tool:<turnId>:<transcriptId>)
 *   each tool settles → tool.result; when the step's results are all in → the next model.step
 *   a response without tool calls → turn.completed; the next queued message starts its turn
 *   a call the approval policy names → approval.requested + a deadline timer, and no effect until
 *     tool.approve writes it; tool.deny or the deadline (tool.approval-timeout) answer it "denied"
 *   a deadline's timer that can never fire (the engine's onTimerFailed) → turn.timer-failed + turn.ended failed
 *
 * Everything here is pure: the transcript a provider replays is a projection of these events, and
 * every tool call gets exactly one result event, from its outcome or from a synthetic result when
 * its turn ends first. A result that arrives after its turn closed is recorded as `effect.late` and
 * never touches the transcript. Events and state live in ThreadEvents.ts, the planning of a
 * response's calls in ToolCallPlanning.ts, what a failure tells the model in FailureDescriptions.ts,
 * how a turn starts, goes on and ends in TurnProgress.ts, the approval decisions in ApprovalDecisions.ts,
 * a deadline that cannot fire in DeadlineFailures.ts.
 */
import {
  Aggregate,
  Decision,
  type DecideContext,
  type EffectIntent,
  type EffectOutcome,
  Reactor,
  type TimerFailure
} from "@orchestration/engine"
import { HashSet, Schema } from "effect"
import { type ApprovalPolicy, off as approvalOff } from "./Approval.js"
import { decideApproval, decideApprovalTimeout, withholdForApproval } from "./ApprovalDecisions.js"
import { decideTimerFailure } from "./DeadlineFailures.js"
import * as Delegation from "./Delegation.js"
import { describeFailure } from "./FailureDescriptions.js"
import * as MessageQueue from "./MessageQueue.js"
import {
  type ActiveTurn,
  type CleanupPayload,
  cleanupEffectId,
  DEFAULT_STEP_LIMIT,
  evolve,
  initialState,
  MessageId,
  type ResultRecord,
  ThreadEvent,
  ThreadId,
  type ThreadState,
  turnIdOf
} from "./ThreadEvents.js"
import { planCalls, type ResponseCall } from "./ToolCallPlanning.js"
import { answerCall, continueTurn, endTurn, startNextQueued, startTurn } from "./TurnProgress.js"
import { type EffectKind, toolPolicies } from "./Tools.js"

export { describeFailure, type FailureDescription } from "./FailureDescriptions.js"
export {
  type ActiveTurn,
  type CallRecord,
  cleanupEffectId,
  DEFAULT_STEP_LIMIT,
  ResultOutcome,
  type ResultRecord,
  stepEffectId,
  ThreadEvent,
  ThreadId,
  type ThreadState,
  toolEffectId,
  turnIdOf
} from "./ThreadEvents.js"
export { uniqueCallId } from "./ToolCallPlanning.js"

// ---- deciding ---------------------------------------------------------------------------------

interface TurnRules {
  readonly stepLimit: number
  readonly approval: ApprovalPolicy
}

const onModelStep = (
  state: ThreadState,
  active: ActiveTurn,
  threadId: string,
  outcome: EffectOutcome,
  rules: TurnRules,
  ctx: DecideContext
): Decision<ThreadEvent> => {
  const { stepLimit } = rules
  const now = ctx.now
  if (outcome.status === "failed" || outcome.status === "cancelled") {
    return endTurn(state, active, threadId, "failed", `model step failed: ${outcome.error?.message ?? outcome.status}`)
  }
  const response = outcome.response as { text?: string; toolCalls?: ReadonlyArray<ResponseCall> } | undefined
  const text = response?.text ?? ""
  const toolCalls = response?.toolCalls ?? []
  if (toolCalls.length === 0) {
    const completed: ThreadEvent = { type: "turn.completed", turnId: active.turnId, steps: active.step, text }
    const next = startNextQueued({ ...state, active: null }, threadId)
    return Decision.of<ThreadEvent>({ events: [completed, ...next.events], effects: next.effects })
  }
  const { calls, unknownResults, effects } = planCalls(threadId, active, state.transcriptIds, toolCalls, now)
  const responded: ThreadEvent = {
    type: "model.responded",
    turnId: active.turnId,
    step: active.step,
    text,
    toolCalls: calls
  }
  if (unknownResults.length === calls.length) {
    // Every call named an unknown tool: all results are in already, so the turn goes on now.
    const answered: ActiveTurn = { ...active, calls, answered: calls.map((c) => c.transcriptId) }
    const after = evolve(state, responded)
    return continueTurn(after, answered, threadId, [responded, ...unknownResults], stepLimit)
  }
  const planned = withholdForApproval(state, { ...active, calls }, threadId, effects, rules.approval, ctx)
  return Decision.of<ThreadEvent>({
    events: [responded, ...unknownResults, ...planned.requested],
    effects: planned.now,
    timers: planned.timers
  })
}

const onToolOutcome = (
  state: ThreadState,
  active: ActiveTurn,
  threadId: string,
  outcome: EffectOutcome,
  stepLimit: number
): Decision<ThreadEvent> => {
  // onOutcome routes here only an outcome of an unanswered call of this turn.
  const call = active.calls.find((c) => c.effectId === outcome.effectId)
  if (call === undefined) return Decision.none()
  const base = { callId: call.callId, transcriptId: call.transcriptId, effectId: call.effectId }
  let result: ResultRecord
  if (outcome.status === "succeeded") {
    result = { ...base, content: JSON.stringify(outcome.response ?? null), outcome: "succeeded" }
  } else if (outcome.status === "cancelled") {
    result = { ...base, content: `cancelled: ${outcome.error?.message ?? "cancelled"}`, outcome: "cancelled" }
  } else {
    const failure = describeFailure(outcome, call)
    result = { ...base, content: failure.content, outcome: failure.outcome }
    if (failure.failsTurn) {
      // The failure to record is the call's one result, and the turn ends failed with its reason.
      const resultEvent: ThreadEvent = { type: "tool.result", turnId: active.turnId, result }
      return endTurn(state, active, threadId, "failed", outcome.error?.message ?? "storage failure", {
        events: [resultEvent],
        answered: [call.transcriptId]
      })
    }
  }
  return answerCall(state, active, threadId, call, result, stepLimit)
}

const isFinal = (status: EffectOutcome["status"]) =>
  status === "succeeded" || status === "failed" || status === "cancelled"

/** The thread's commands; `message.send` and the approvals start or move a turn. */
const threadCommands = {
  "thread.create": Aggregate.command("thread.create", {
    threadId: ThreadId,
    title: Schema.optional(Schema.String.pipe(Schema.maxLength(200)))
  }),
  "message.send": Aggregate.command("message.send", {
    threadId: ThreadId,
    messageId: MessageId,
    text: Schema.String.pipe(Schema.maxLength(100_000)),
    /** Set only by a delegate with `await: true` (Delegation.ts). */
    awaitedBy: Schema.optional(Delegation.AwaitedBy)
  }),
  "turn.interrupt": Aggregate.command("turn.interrupt", { threadId: ThreadId, turnId: Schema.String }),
  "thread.delete": Aggregate.command("thread.delete", { threadId: ThreadId }),
  /** `callId` is the call's thread-unique id (its transcript id, as GET /v1/approvals lists it). */
  "tool.approve": Aggregate.command("tool.approve", {
    threadId: ThreadId,
    callId: Schema.String.pipe(Schema.maxLength(200)),
    note: Schema.optional(Schema.String.pipe(Schema.maxLength(2_000)))
  }),
  "tool.deny": Aggregate.command("tool.deny", {
    threadId: ThreadId,
    callId: Schema.String.pipe(Schema.maxLength(200)),
    reason: Schema.optional(Schema.String.pipe(Schema.maxLength(2_000)))
  }),
  /** Sent by an approval's deadline timer (Waits.ts adds `wait` and `token`). */
  "tool.approval-timeout": Aggregate.command("tool.approval-timeout", {
    threadId: ThreadId,
    wait: Schema.String,
    token: Schema.String
  })
}

/**
 * The turn an outcome belongs to: the one its payload names. A row whose stored payload could not be
 * read (Outbox.toRow gives `payload: null`; verdictFor fails it unperformed) is matched to the running
 * turn by its effect id; failing that it belongs to no turn this thread still runs, so it is late.
 */
const turnIdOfOutcome = (active: ActiveTurn | null, outcome: EffectOutcome): string => {
  const named = (outcome.payload as { turnId?: unknown } | null)?.turnId
  if (typeof named === "string") return named
  const ofActive =
    active !== null &&
    (outcome.effectId === active.stepEffectId || active.calls.some((c) => c.effectId === outcome.effectId))
  return ofActive ? active.turnId : ""
}

/**
 * A settled effect of the thread's own kinds: the model step or tool call of the running turn, a
 * late one of a closed turn, or the cleanup after a delete.
 */
const decideOutcome = (state: ThreadState, outcome: EffectOutcome, ctx: DecideContext, rules: TurnRules) => {
  const threadId = ctx.aggregateId
  if (outcome.kind === "thread.cleanup") {
    return outcome.status === "succeeded"
      ? Decision.of<ThreadEvent>({ events: [{ type: "thread.cleaned" }] })
      : Decision.none()
  }
  const active = state.active
  const turnId = turnIdOfOutcome(active, outcome)
  const current =
    active !== null &&
    active.turnId === turnId &&
    (outcome.kind === "model.step"
      ? outcome.effectId === active.stepEffectId
      : active.calls.some((c) => c.effectId === outcome.effectId && !active.answered.includes(c.transcriptId)))
  // A process-bound call runs at most once per call: once its call has its result (its turn
  // closed or went on), an operator's retry would perform it again for nobody to hear.
  if (
    outcome.status === "retrying" &&
    outcome.by === "operator" &&
    !current &&
    Reactor.processLossOf(toolPolicies[outcome.kind as EffectKind]?.onProcessLoss, outcome.payload) === "process-bound"
  ) {
    const closed = active === null || active.turnId !== turnId
    return Decision.reject(
      "call-answered",
      `${outcome.kind} ${outcome.effectId} is process-bound and its call already has its result (its turn ${closed ? "has closed" : "went on"}); ` +
        "it is never performed again: ask for a new call instead"
    )
  }
  // Retries and requeues change only the effect row; the domain waits for a final outcome.
  if (!isFinal(outcome.status)) return Decision.none()
  if (!current) {
    // Its turn closed already (interrupt, failure, delete): the row and read model move on,
    // the transcript, which holds this call's synthetic result, does not.
    return Decision.of<ThreadEvent>({
      events: [{ type: "effect.late", turnId, effectId: outcome.effectId, status: outcome.status }]
    })
  }
  return outcome.kind === "model.step"
    ? onModelStep(state, active, threadId, outcome, rules, ctx)
    : onToolOutcome(state, active, threadId, outcome, rules.stepLimit)
}

export const makeThread = (
  options: {
    readonly stepLimit?: number
    readonly approval?: ApprovalPolicy
    /** How long an awaited delegate waits when its call names no timeout. Default 30 minutes. */
    readonly delegateTimeoutMs?: number
  } = {}
) => {
  const stepLimit = options.stepLimit ?? DEFAULT_STEP_LIMIT
  const rules: TurnRules = { stepLimit, approval: options.approval ?? approvalOff }
  const thread = Aggregate.make({
    name: "thread",
    commands: threadCommands,
    events: ThreadEvent,
    aggregateId: (command) => command.threadId,
    initialState,
    evolve,
    decide: (state: ThreadState, command, ctx: DecideContext) => {
      const threadId = ctx.aggregateId
      switch (command.type) {
        case "thread.create":
          if (state.exists) return Decision.reject("already-exists", `thread '${threadId}' already exists`)
          return Decision.of<ThreadEvent>({ events: [{ type: "thread.created", title: command.title ?? null }] })
        case "message.send": {
          if (state.deleted) return Decision.reject("thread-deleted", `thread '${threadId}' was deleted`)
          if (HashSet.has(state.messageIds, command.messageId)) {
            return Decision.reject(
              "duplicate-message",
              `message '${command.messageId}' was already sent to thread '${threadId}'`
            )
          }
          const created: Array<ThreadEvent> = state.exists ? [] : [{ type: "thread.created", title: null }]
          if (state.active !== null) {
            const turnId = turnIdOf(threadId, command.messageId)
            return Decision.of<ThreadEvent>({
              events: [...created, { type: "message.queued", messageId: command.messageId, turnId, text: command.text }]
            })
          }
          const started = startTurn(state, threadId, command.messageId, command.text)
          return Decision.of<ThreadEvent>({ events: [...created, ...started.events], effects: started.effects })
        }
        case "turn.interrupt":
          // Interrupting a turn that is not running is accepted and changes nothing (like a replayed Stop).
          if (state.active === null || state.active.turnId !== command.turnId) return Decision.none()
          return endTurn(state, state.active, threadId, "interrupted", "interrupted by the user")
        case "thread.delete": {
          if (!state.exists) return Decision.reject("not-found", `thread '${threadId}' does not exist`)
          if (state.deleted) return Decision.none()
          const cleanup: EffectIntent = {
            id: cleanupEffectId(threadId),
            kind: "thread.cleanup",
            payload: { threadId } satisfies CleanupPayload
          }
          const deleted: ThreadEvent = { type: "thread.deleted" }
          if (state.active === null) return Decision.of<ThreadEvent>({ events: [deleted], effects: [cleanup] })
          const ended = endTurn(
            { ...state, queue: MessageQueue.empty },
            state.active,
            threadId,
            "interrupted",
            "thread deleted"
          )
          return Decision.of<ThreadEvent>({
            events: [...ended.events, deleted],
            effects: [cleanup],
            cancel: ended.cancel,
            ...(ended.cancelTimers === undefined ? {} : { cancelTimers: ended.cancelTimers })
          })
        }
        case "tool.approve":
        case "tool.deny": {
          const answer =
            command.type === "tool.approve"
              ? { verdict: "approved" as const, callId: command.callId, note: command.note }
              : { verdict: "denied" as const, callId: command.callId, note: command.reason }
          return decideApproval(state, threadId, answer, stepLimit)
        }
        case "tool.approval-timeout":
          return decideApprovalTimeout(state, threadId, command.wait, command.token, ctx, stepLimit)
      }
    },
    onOutcome: (state: ThreadState, outcome: EffectOutcome, ctx: DecideContext) =>
      decideOutcome(state, outcome, ctx, rules)
  })

  // Delegate-and-await (Delegation.ts) wraps the thread's own decider: its commands, the outcomes it
  // owns, and what it adds to every decision (replies owed, children withdrawn, chains carried).
  const core: Delegation.ThreadCore = {
    onOutcome: thread.onOutcome!,
    interrupt: (state, active, threadId, reason) => endTurn(state, active, threadId, "interrupted", reason),
    timeoutMs: options.delegateTimeoutMs ?? Delegation.DEFAULT_DELEGATE_TIMEOUT_MS
  }
  const withDelegation = Aggregate.make({
    name: thread.name,
    commands: { ...thread.commands, ...Delegation.delegationCommands },
    events: ThreadEvent,
    aggregateId: (command: Parameters<typeof thread.decide>[1] | Delegation.DelegationCommand) => command.threadId,
    initialState,
    evolve,
    decide: (
      state: ThreadState,
      command: Parameters<typeof thread.decide>[1] | Delegation.DelegationCommand,
      ctx: DecideContext
    ) => {
      if (Delegation.isDelegationCommand(command)) return Delegation.decideDelegation(state, command, ctx, core)
      return (
        Delegation.refuseAwaited(state, command, ctx) ??
        Delegation.aroundDecide(state, command, ctx, thread.decide(state, command, ctx))
      )
    },
    onOutcome: (state: ThreadState, outcome: EffectOutcome, ctx: DecideContext) => {
      const owned = Delegation.onDelegationOutcome(state, outcome, ctx, core)
      if (owned !== undefined) return owned
      const decided = thread.onOutcome!(state, outcome, ctx)
      return decided._tag === "Rejection" ? decided : Delegation.afterDecision(state, ctx, decided)
    },
    // A deadline (an approval's, an awaited delegate's) that can never fire ends its turn failed.
    onTimerFailed: (state: ThreadState, failure: TimerFailure, ctx: DecideContext) =>
      Delegation.afterDecision(state, ctx, decideTimerFailure(state, failure, ctx))
  })
  type Command = Parameters<typeof thread.decide>[1] | Delegation.DelegationCommand
  return withDelegation as Aggregate.AggregateDefinition<ThreadState, Command, ThreadEvent>
}

export const Thread = makeThread()
export type ThreadAggregate = typeof Thread
