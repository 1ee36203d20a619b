/**
 * The Thread aggregate: messages and turns, where a turn is a loop run entirely through the outbox.
 *
 *   message.send → turn.started + effect model.step (step:<turnId>#1)
 *   model.step settles → model.responded + one effect per tool call (tool:<turnId>:<transcriptId>)
 *   each tool settles → tool.result; when the step's results are all in → the next model.step
 *   a response without tool calls → turn.completed; the next queued message starts its turn
 *
 * Everything here is pure: the transcript a provider replays is a projection of these events, and
 * every tool call gets exactly one result event, from its outcome or from a synthetic result when
 * its turn ends first. A result that arrives after its turn closed is recorded as `effect.late` and
 * never touches the transcript.
 */
import {
  Aggregate,
  CommandId,
  Decision,
  type DecideContext,
  type EffectIntent,
  type EffectOutcome,
  Reactor
} from "@orchestration/engine"
import { Schema } from "effect"
import { type McpCallPayload, type McpTarget, parseOfferedName } from "./McpTools.js"
import { type EffectKind, isToolName, toolKind, toolPolicies, type ToolName } from "./Tools.js"

/** Thread and message ids: short, and safe to embed in effect and command ids. */
export const ThreadId = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9._-]{1,128}$/, { description: "1-128 of A-Z a-z 0-9 . _ -" })
)
const MessageId = ThreadId

export const DEFAULT_STEP_LIMIT = 20

// ---- events ---------------------------------------------------------------------------------

const CallRecord = Schema.Struct({
  callId: Schema.String,
  /**
   * The call's own id, unique in the thread: the provider's, unless an earlier call of the thread
   * (this step's, an earlier step's or turn's) used it. Effect ids and answers are keyed by it.
   */
  transcriptId: Schema.String,
  effectId: Schema.String,
  name: Schema.String,
  arguments: Schema.Unknown,
  /** When the model asked for it (epoch ms); its performance starts at or after this. */
  at: Schema.optional(Schema.Number)
})
export type CallRecord = typeof CallRecord.Type

export const ResultOutcome = Schema.Literal(
  "succeeded",
  "failed",
  "interrupted",
  "cancelled",
  "unknown-tool",
  "storage"
)
const ResultRecord = Schema.Struct({
  callId: Schema.String,
  transcriptId: Schema.String,
  effectId: Schema.String,
  content: Schema.String,
  outcome: ResultOutcome
})
export type ResultRecord = typeof ResultRecord.Type

export const ThreadEvent = Schema.Union(
  Aggregate.event("thread.created", { title: Schema.NullOr(Schema.String) }),
  Aggregate.event("message.queued", { messageId: Schema.String, turnId: Schema.String, text: Schema.String }),
  Aggregate.event("turn.started", {
    turnId: Schema.String,
    ordinal: Schema.Number,
    messageId: Schema.String,
    text: Schema.String
  }),
  Aggregate.event("model.responded", {
    turnId: Schema.String,
    step: Schema.Number,
    text: Schema.String,
    toolCalls: Schema.Array(CallRecord)
  }),
  Aggregate.event("tool.result", { turnId: Schema.String, result: ResultRecord }),
  Aggregate.event("turn.completed", { turnId: Schema.String, steps: Schema.Number, text: Schema.String }),
  Aggregate.event("turn.ended", {
    turnId: Schema.String,
    status: Schema.Literal("failed", "interrupted"),
    reason: Schema.String,
    /** One result for each call still unanswered, so the next turn replays validly. */
    synthetic: Schema.Array(ResultRecord)
  }),
  Aggregate.event("effect.late", { turnId: Schema.String, effectId: Schema.String, status: Schema.String }),
  Aggregate.event("thread.deleted", {}),
  Aggregate.event("thread.cleaned", {})
)
export type ThreadEvent = typeof ThreadEvent.Type

// ---- state ----------------------------------------------------------------------------------

export interface ActiveTurn {
  readonly turnId: string
  readonly ordinal: number
  readonly step: number
  readonly stepEffectId: string
  /** Calls of the current step, and which of them have their result (by transcript id). */
  readonly calls: ReadonlyArray<CallRecord>
  readonly answered: ReadonlyArray<string>
}

export interface ThreadState {
  readonly exists: boolean
  readonly deleted: boolean
  readonly turns: number
  readonly active: ActiveTurn | null
  readonly queue: ReadonlyArray<{ readonly messageId: string; readonly text: string }>
  readonly messageIds: ReadonlyArray<string>
  readonly transcriptIds: ReadonlyArray<string>
}

const initialState: ThreadState = {
  exists: false,
  deleted: false,
  turns: 0,
  active: null,
  queue: [],
  messageIds: [],
  transcriptIds: []
}

// ---- ids --------------------------------------------------------------------------------------

export const turnIdOf = (threadId: string, messageId: string) => `${threadId}:${messageId}`
export const stepEffectId = (turnId: string, step: number) => CommandId.boundedId("step:", `${turnId}#${step}`)
export const toolEffectId = (turnId: string, callId: string) => CommandId.boundedId("tool:", `${turnId}:${callId}`)
export const cleanupEffectId = (threadId: string) => CommandId.boundedId("cleanup:", threadId)

const evolve = (state: ThreadState, event: ThreadEvent): ThreadState => {
  switch (event.type) {
    case "thread.created":
      return { ...state, exists: true }
    case "message.queued":
      return {
        ...state,
        queue: [...state.queue, { messageId: event.messageId, text: event.text }],
        messageIds: [...state.messageIds, event.messageId]
      }
    case "turn.started":
      return {
        ...state,
        turns: event.ordinal,
        queue: state.queue.filter((q) => q.messageId !== event.messageId),
        messageIds: state.messageIds.includes(event.messageId)
          ? state.messageIds
          : [...state.messageIds, event.messageId],
        active: {
          turnId: event.turnId,
          ordinal: event.ordinal,
          step: 1,
          stepEffectId: stepEffectId(event.turnId, 1),
          calls: [],
          answered: []
        }
      }
    case "model.responded":
      return state.active === null
        ? state
        : {
            ...state,
            transcriptIds: [...state.transcriptIds, ...event.toolCalls.map((c) => c.transcriptId)],
            active: { ...state.active, step: event.step, calls: event.toolCalls, answered: [] }
          }
    case "tool.result": {
      const active = state.active
      if (active === null) return state
      const answered = [...active.answered, event.result.transcriptId]
      const allIn = active.calls.every((c) => answered.includes(c.transcriptId))
      // All results in: the next step begins (its effect was decided with this event).
      return allIn
        ? {
            ...state,
            active: {
              ...active,
              step: active.step + 1,
              stepEffectId: stepEffectId(active.turnId, active.step + 1),
              calls: [],
              answered: []
            }
          }
        : { ...state, active: { ...active, answered } }
    }
    case "turn.completed":
    case "turn.ended":
      return { ...state, active: null }
    case "thread.deleted":
      return { ...state, deleted: true, active: null, queue: [] }
    case "effect.late":
    case "thread.cleaned":
      return state
  }
}

// ---- deciding ---------------------------------------------------------------------------------

const modelStep = (threadId: string, turnId: string, step: number): EffectIntent => ({
  id: stepEffectId(turnId, step),
  kind: "model.step",
  payload: { threadId, turnId, step }
})

/** Starts the turn of a message: the user message enters the transcript now, never earlier. */
const startTurn = (state: ThreadState, threadId: string, messageId: string, text: string) => {
  const turnId = turnIdOf(threadId, messageId)
  return {
    events: [{ type: "turn.started", turnId, ordinal: state.turns + 1, messageId, text } as const],
    effects: [modelStep(threadId, turnId, 1)]
  }
}

/** After a turn ends: the next queued message starts its turn, in order. */
const startNextQueued = (state: ThreadState, threadId: string) => {
  const next = state.queue[0]
  return next === undefined || state.deleted
    ? { events: [], effects: [] }
    : startTurn(state, threadId, next.messageId, next.text)
}

/** Ends the active turn: synthetic results for unanswered calls, cancels, then the next turn. */
const endTurn = (
  state: ThreadState,
  threadId: string,
  status: "failed" | "interrupted",
  reason: string,
  extra: { readonly events?: ReadonlyArray<ThreadEvent>; readonly answered?: ReadonlyArray<string> } = {}
): Decision<ThreadEvent> => {
  const active = state.active!
  const answered = [...active.answered, ...(extra.answered ?? [])]
  const unanswered = active.calls.filter((c) => !answered.includes(c.transcriptId))
  const synthetic = unanswered.map(
    (c): ResultRecord => ({
      callId: c.callId,
      transcriptId: c.transcriptId,
      effectId: c.effectId,
      content: `${status}: the turn ${status === "failed" ? "failed" : "was interrupted"} before this call finished (${reason})`,
      outcome: status === "failed" ? "failed" : "interrupted"
    })
  )
  const ended: ThreadEvent = { type: "turn.ended", turnId: active.turnId, status, reason, synthetic }
  const after = { ...state, active: null }
  const next = startNextQueued(after, threadId)
  return Decision.of<ThreadEvent>({
    events: [...(extra.events ?? []), ended, ...next.events],
    effects: next.effects,
    cancel: [active.stepEffectId, ...unanswered.map((c) => c.effectId)].map((effectId) => ({ effectId, reason }))
  })
}

/** The next model step once a step's results are all in, or the end of the turn at the step limit. */
const continueTurn = (
  state: ThreadState,
  threadId: string,
  results: ReadonlyArray<ThreadEvent>,
  stepLimit: number
): Decision<ThreadEvent> => {
  const active = state.active!
  const next = active.step + 1
  if (next > stepLimit) {
    return endTurn(state, threadId, "failed", `step limit of ${stepLimit} model steps reached`, {
      events: results,
      answered: active.calls.map((c) => c.transcriptId)
    })
  }
  return Decision.of<ThreadEvent>({ events: results, effects: [modelStep(threadId, active.turnId, next)] })
}

const safeCallId = (id: string) => (/^[A-Za-z0-9._-]{1,64}$/.test(id) ? id : CommandId.boundedId("c-", id, 0))

/**
 * An id for a call that no earlier call of the thread has: providers reuse ids (within one response,
 * across steps, across turns), and the transcript, the effect id and the read model's key must not.
 * Deterministic: the same response in the same state always gets the same ids.
 */
export const uniqueCallId = (callId: string, ordinal: number, used: ReadonlySet<string>): string => {
  if (!used.has(callId)) return callId
  const inTurn = `${callId}_t${ordinal}`
  if (!used.has(inTurn)) return inTurn
  let n = 2
  while (used.has(`${inTurn}_${n}`)) n++
  return `${inTurn}_${n}`
}

/** What to tell the model about a failed tool, and whether the turn itself must fail. */
export const describeFailure = (
  outcome: EffectOutcome,
  call: CallRecord
): { readonly content: string; readonly outcome: ResultRecord["outcome"]; readonly failsTurn: boolean } => {
  const error = outcome.error ?? { message: "failed" }
  const code = error.code ?? ""
  if (code.startsWith("SQLITE_") || error.message.startsWith("storage:") || code === "53100" || code === "ENOSPC") {
    return { content: `error: ${error.message}`, outcome: "storage", failsTurn: true }
  }
  if (
    code === "process-ended" ||
    code === "owner-lost" ||
    code === "server-exited" ||
    (code === "timeout" && error.message.includes("may or may not"))
  ) {
    return {
      content: `interrupted: ${outcome.kind} ${outcome.effectId} may or may not have taken effect${whatIsKnown(call, code)}; verify ${whatToVerify(call)} before repeating it`,
      outcome: "interrupted",
      failsTurn: false
    }
  }
  return { content: `error: ${error.message}`, outcome: "failed", failsTurn: false }
}

/** For a cut-off command: what it was, when it was started, and that its process is gone. */
const whatIsKnown = (call: CallRecord, code: string): string => {
  if (call.name !== "execute" || code !== "process-ended") return ""
  const command = JSON.stringify((call.arguments as { command?: unknown } | undefined)?.command ?? "")
  const requested = call.at === undefined ? "" : ` requested at ${new Date(call.at).toISOString()}`
  // The decider cannot know whether the process had started; the ledger line (ledger.jsonl) says when.
  return ` (the command ${command}${requested} may have started; any process of it died with the server, so it may have partly run)`
}

/** The one thing the model should check before repeating a cut-off call. */
const whatToVerify = (call: CallRecord): string => {
  const args = (call.arguments ?? {}) as Record<string, unknown>
  switch (call.name) {
    case "execute":
      return `whether the command ${JSON.stringify(args.command ?? "")} already ran`
    case "publish":
      return `the latest version at ${JSON.stringify(args.path ?? "")}`
    case "trigger_edit":
      return `trigger ${JSON.stringify(args.triggerId ?? "")}`
    default: {
      const mcp = parseOfferedName(call.name)
      return mcp === undefined
        ? `the effect of ${call.name}`
        : `whether the call of ${mcp.tool} on MCP server ${mcp.server} already took effect`
    }
  }
}

const onModelStep = (
  state: ThreadState,
  threadId: string,
  outcome: EffectOutcome,
  stepLimit: number,
  now: number
): Decision<ThreadEvent> => {
  const active = state.active!
  if (outcome.status === "failed" || outcome.status === "cancelled") {
    return endTurn(state, threadId, "failed", `model step failed: ${outcome.error?.message ?? outcome.status}`)
  }
  const response = outcome.response as {
    text?: string
    toolCalls?: ReadonlyArray<{ id: string; name: string; arguments: unknown; mcp?: McpTarget }>
  }
  const text = response?.text ?? ""
  const toolCalls = response?.toolCalls ?? []
  if (toolCalls.length === 0) {
    const completed: ThreadEvent = { type: "turn.completed", turnId: active.turnId, steps: active.step, text }
    const next = startNextQueued({ ...state, active: null }, threadId)
    return Decision.of<ThreadEvent>({ events: [completed, ...next.events], effects: next.effects })
  }
  const used = new Set(state.transcriptIds)
  const calls = toolCalls.map((call, index): CallRecord => {
    const callId = safeCallId(call.id || `call_${active.step}_${index}`)
    const transcriptId = uniqueCallId(callId, active.ordinal, used)
    used.add(transcriptId)
    return {
      callId,
      transcriptId,
      effectId: toolEffectId(active.turnId, transcriptId),
      name: call.name,
      arguments: call.arguments ?? {},
      at: now
    }
  })
  const responded: ThreadEvent = {
    type: "model.responded",
    turnId: active.turnId,
    step: active.step,
    text,
    toolCalls: calls
  }
  // An unknown tool is an error result the model sees, never a crash and never an effect. A name
  // of the form <server>__<tool> is an MCP call; whether it exists is for its performer to say.
  const known = (name: string) => isToolName(name) || parseOfferedName(name) !== undefined
  const unknown = calls.filter((c) => !known(c.name))
  const unknownResults: Array<ThreadEvent> = unknown.map((c) => ({
    type: "tool.result",
    turnId: active.turnId,
    result: {
      callId: c.callId,
      transcriptId: c.transcriptId,
      effectId: c.effectId,
      content: `error: unknown tool '${c.name}'`,
      outcome: "unknown-tool"
    }
  }))
  const effects = calls.flatMap((c, index): Array<EffectIntent> => {
    const payload = { threadId, turnId: active.turnId, callId: c.callId, name: c.name, arguments: c.arguments }
    if (isToolName(c.name)) return [{ id: c.effectId, kind: toolKind(c.name as ToolName), payload }]
    const target = parseOfferedName(c.name)
    if (target === undefined) return []
    // The policy the step found in the tool's annotations, recorded now; a name the step did not
    // offer gets the safe one.
    const offered = toolCalls[index]?.mcp
    const mcp: McpTarget = {
      ...target,
      onProcessLoss:
        offered?.server === target.server && offered.tool === target.tool ? offered.onProcessLoss : "process-bound"
    }
    return [{ id: c.effectId, kind: "tool.mcp_call", payload: { ...payload, mcp } satisfies McpCallPayload }]
  })
  if (effects.length === 0) {
    const afterResponse = evolve(state, responded)
    return continueTurn(
      { ...afterResponse, active: { ...afterResponse.active!, answered: calls.map((c) => c.transcriptId) } },
      threadId,
      [responded, ...unknownResults],
      stepLimit
    )
  }
  return Decision.of<ThreadEvent>({ events: [responded, ...unknownResults], effects })
}

const onToolOutcome = (
  state: ThreadState,
  threadId: string,
  outcome: EffectOutcome,
  stepLimit: number
): Decision<ThreadEvent> => {
  const active = state.active!
  const call = active.calls.find((c) => c.effectId === outcome.effectId)!
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
      return endTurn(state, threadId, "failed", outcome.error?.message ?? "storage failure", {
        events: [resultEvent],
        answered: [call.transcriptId]
      })
    }
  }
  const resultEvent: ThreadEvent = { type: "tool.result", turnId: active.turnId, result }
  const answered = [...active.answered, call.transcriptId]
  if (!active.calls.every((c) => answered.includes(c.transcriptId)))
    return Decision.of<ThreadEvent>({ events: [resultEvent] })
  return continueTurn({ ...state, active: { ...active, answered } }, threadId, [resultEvent], stepLimit)
}

const isFinal = (status: EffectOutcome["status"]) =>
  status === "succeeded" || status === "failed" || status === "cancelled"

export const makeThread = (options: { readonly stepLimit?: number } = {}) => {
  const stepLimit = options.stepLimit ?? DEFAULT_STEP_LIMIT
  return Aggregate.make({
    name: "thread",
    commands: {
      "thread.create": Aggregate.command("thread.create", {
        threadId: ThreadId,
        title: Schema.optional(Schema.String.pipe(Schema.maxLength(200)))
      }),
      "message.send": Aggregate.command("message.send", {
        threadId: ThreadId,
        messageId: MessageId,
        text: Schema.String.pipe(Schema.maxLength(100_000))
      }),
      "turn.interrupt": Aggregate.command("turn.interrupt", { threadId: ThreadId, turnId: Schema.String }),
      "thread.delete": Aggregate.command("thread.delete", { threadId: ThreadId })
    },
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
          if (state.messageIds.includes(command.messageId)) {
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
          return endTurn(state, threadId, "interrupted", "interrupted by the user")
        case "thread.delete": {
          if (!state.exists) return Decision.reject("not-found", `thread '${threadId}' does not exist`)
          if (state.deleted) return Decision.none()
          const cleanup: EffectIntent = { id: cleanupEffectId(threadId), kind: "thread.cleanup", payload: { threadId } }
          const deleted: ThreadEvent = { type: "thread.deleted" }
          if (state.active === null) return Decision.of<ThreadEvent>({ events: [deleted], effects: [cleanup] })
          const ended = endTurn({ ...state, queue: [] }, threadId, "interrupted", "thread deleted")
          return Decision.of<ThreadEvent>({
            events: [...ended.events, deleted],
            effects: [cleanup],
            cancel: ended.cancel
          })
        }
      }
    },
    onOutcome: (state: ThreadState, outcome: EffectOutcome, ctx: DecideContext) => {
      const threadId = ctx.aggregateId
      if (outcome.kind === "thread.cleanup") {
        return outcome.status === "succeeded"
          ? Decision.of<ThreadEvent>({ events: [{ type: "thread.cleaned" }] })
          : Decision.none()
      }
      const turnId = String((outcome.payload as { turnId?: unknown }).turnId ?? "")
      const active = state.active
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
        Reactor.processLossOf(toolPolicies[outcome.kind as EffectKind]?.onProcessLoss, outcome.payload) ===
          "process-bound"
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
        ? onModelStep(state, threadId, outcome, stepLimit, ctx.now)
        : onToolOutcome(state, threadId, outcome, stepLimit)
    }
  })
}

export const Thread = makeThread()
export type ThreadAggregate = typeof Thread
