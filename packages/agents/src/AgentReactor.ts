/**
 * The reactor that performs the agents domain's effects: model steps through the provider adapter,
 * tools on the world directory, MCP tools on the operator's servers, delegates through the engine's
 * front door, thread cleanup. Each kind's policy, lane and timeout come from the one table in Tools.ts.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import {
  CommandId,
  type DispatchError,
  EffectFailure,
  Engine,
  type FlushWindows,
  type Outbox,
  Reactor,
  StorageErrors,
  StreamIngest
} from "@orchestration/engine"
import { Duration, Effect, ParseResult, Schema } from "effect"
import { createHash } from "node:crypto"
import {
  DelegateCallPayload,
  delegateMessageId,
  DelegateReplyPayload,
  DelegateWithdrawPayload,
  delegationCommandId
} from "./Delegation.js"
import * as McpServers from "./McpServers.js"
import { type McpTarget, parseOfferedName } from "./McpTools.js"
import { ModelProvider, type ModelStepRequest, runStream, streamOf } from "./Provider.js"
import * as StepStreams from "./StepStreams.js"
import { CleanupPayload, turnIdOf } from "./ThreadEvents.js"
import { transcriptOf } from "./ThreadReadModel.js"
import { McpCallPayload, ToolCallPayload } from "./ToolCallPlanning.js"
import { findTrigger } from "./TriggerReadModel.js"
import {
  DelegateInput,
  type ToolDefinition,
  toolDefinitions,
  toolPolicies,
  type EffectKind,
  TriggerEditInput
} from "./Tools.js"
import { THREAD_DELETED, TriggerFirePayload, TriggerSpec } from "./Trigger.js"
import { ModelStepPayload } from "./TurnProgress.js"
import { World, type WorldError, type WorldToolName } from "./World.js"

const kinds = Object.fromEntries(
  Object.values(toolPolicies).map((policy) => [
    policy.kind,
    { onProcessLoss: policy.onProcessLoss, timeout: policy.timeout }
  ])
) as Record<EffectKind, Reactor.KindPolicy>

const isReplaySafe = (kind: string) => kinds[kind as EffectKind]?.onProcessLoss === "replay-safe"

const failure = (message: string, retryable: boolean, code?: string) =>
  new EffectFailure(code === undefined ? { message, retryable } : { message, retryable, code })

/** A write the handler needed was refused by a full disk or the store: its thread's turn cannot go on. */
const storageFailure = (message: string, retryable: boolean, code: string) =>
  new EffectFailure({ message, retryable, code, reason: "storage" })

/**
 * A refused world operation is retried only when the OS error is transient and repeating the kind
 * is safe; a permanent one (a directory in the way, a refused link) fails at once, and its message,
 * which names the path, is the result the model reads.
 */
const worldFailure = (error: WorldError, kind: string) =>
  error._tag === "ToolInputError"
    ? failure(error.message, false)
    : // The sandbox refused to start the command: permanent until the operator acts.
      error._tag === "SandboxUnavailable"
      ? failure(error.message, false, error.reason)
      : (StorageErrors.reasonForCode(error.code) === "disk-full" ? storageFailure : failure)(
          error.message,
          error.reason === "transient" && isReplaySafe(kind),
          error.code
        )

/** Longest text of one issue given back to the model (a value it sent may be echoed inside). */
const maxIssueLength = 200

interface Issue {
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}

/**
 * Issues in the delegate's own terms: its arguments `threadId` and `text` become the message.send
 * fields of the same names, so an issue there names the argument to change and what is allowed;
 * the other fields are derived here, not chosen by the model.
 */
const describeIssues = (issues: ReadonlyArray<Issue>): string =>
  issues
    .map((issue) => {
      const field = issue.path.map(String).join(".")
      const text =
        issue.message.length > maxIssueLength
          ? `${issue.message.slice(0, maxIssueLength)}… (${issue.message.length} characters)`
          : issue.message
      return field === "threadId" || field === "text"
        ? `argument '${field}': ${text}`
        : `${field || "arguments"}: ${text}`
    })
    .join("; ")

/** Why the target thread refused the delegated message, naming each argument it refused. */
export const delegateRefusal = (error: { readonly message: string; readonly issues?: ReadonlyArray<Issue> }): string =>
  `delegate refused: ${error.issues === undefined || error.issues.length === 0 ? error.message : describeIssues(error.issues)}`

/** An MCP tool as the provider sees it: the schema it accepts is the server's own JSON schema. */
export const mcpToolDefinition = (entry: McpServers.McpToolEntry): ToolDefinition => ({
  name: entry.name,
  description: entry.description,
  input: Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({ jsonSchema: entry.inputSchema })
})

/**
 * The step's text deltas and its tool calls' argument deltas, recorded as chunks of this attempt
 * (StreamIngest; a call's arguments in channel `StepStreams.toolChannel(callId)`) while the provider
 * streams, all flushed before the step answers: its outcome commits after its last chunk. A stream
 * that cannot be recorded ends the step at once with that failure (`storage: <code>`), provider
 * request aborted; the final response, not the deltas, is what the outcome and transcript hold.
 */
/** How long a stopped step's last flush may take: an interrupt still stops the step within a second. */
const tailFlushLimit = Duration.millis(500)

const streamedStep = (row: Outbox.OutboxRow, request: ModelStepRequest) =>
  Effect.scoped(
    Effect.gen(function* () {
      const provider = yield* ModelProvider
      const ingest = yield* StreamIngest.make({ effect: row })
      const response = yield* Effect.raceFirst(
        runStream(request, "model", streamOf(provider, request), (part) =>
          part.type === "text-delta"
            ? ingest.write(part.text)
            : part.type === "tool-call-delta"
              ? ingest.write(part.delta, StepStreams.toolChannel(part.callId))
              : Effect.void
        ),
        ingest.failed
      ).pipe(
        // Stopped (an interrupt, a cancel): what the provider sent and is still buffered (< 50 ms of
        // text) is flushed before the stop is acknowledged, so the partial text kept is all of it.
        Effect.onInterrupt(() =>
          ingest.flush.pipe(
            Effect.timeout(tailFlushLimit),
            // swallow-ok: the step has no outcome left to fail (it is cancelled); a tail the store refused stays unrecorded, and says so.
            Effect.catchAll((error) => Effect.logWarning("the stopped step's buffered text was not recorded", error))
          )
        )
      )
      yield* ingest.flush
      return response
    })
  ).pipe(
    Effect.mapError((e) =>
      e._tag === "StreamNotRecorded"
        ? StreamIngest.toEffectFailure(e)
        : failure(`${e.provider}: ${e.message}`, e.reason === "unavailable", e.reason)
    )
  )

/**
 * One step: the built-in tools and the MCP tools of the servers up now. Each call of an offered MCP
 * tool carries the policy its annotations give, so the decider records it with the call.
 */
const modelStep = (row: Outbox.OutboxRow, { threadId }: ModelStepPayload) =>
  Effect.gen(function* () {
    const mcpTools = yield* (yield* McpServers.McpServers).tools
    const transcript = yield* transcriptOf(threadId).pipe(
      Effect.mapError((e) =>
        // A damaged message stays damaged until an operator repairs it: asking again cannot help.
        e._tag === "TranscriptUnreadable"
          ? failure(e.message, false, "transcript-unreadable")
          : failure(`could not read the transcript: ${e.message}`, true)
      )
    )
    const response = yield* streamedStep(row, {
      requestId: row.effectId,
      transcript,
      tools: [...toolDefinitions, ...mcpTools.map(mcpToolDefinition)]
    })
    const offered = new Map(mcpTools.map((entry) => [entry.name, entry]))
    return {
      ...response,
      toolCalls: response.toolCalls.map((call) => {
        const entry = offered.get(call.name)
        if (entry === undefined) return call
        const mcp: McpTarget = { server: entry.server, tool: entry.tool, onProcessLoss: entry.onProcessLoss }
        return { ...call, mcp }
      })
    }
  })

/** Time left for the server's answer inside the kind's timeout, so a late answer is a typed timeout. */
const mcpCallTimeoutMs = Duration.toMillis(toolPolicies["tool.mcp_call"].timeout) - 2_000

/**
 * A call of an operator's MCP tool. Unknown names and servers that are down fail before the ledger
 * line (nothing was started); from the ledger line on, the call may have acted.
 */
const mcpCall = (row: Outbox.OutboxRow, payload: McpCallPayload) =>
  Effect.gen(function* () {
    const servers = yield* McpServers.McpServers
    const world = yield* World
    const target = payload.mcp ?? parseOfferedName(payload.name)
    const replaySafe = payload.mcp?.onProcessLoss === "replay-safe"
    if (target === undefined) return yield* failure(`unknown tool '${payload.name}'`, false, "unknown-tool")
    const toFailure = (error: McpServers.McpCallError) =>
      // Cut off mid-call: it may have acted, so only a replay-safe call is tried again.
      error.reason === "timeout" || error.reason === "server-exited"
        ? failure(error.message, replaySafe && error.reason === "timeout", error.reason)
        : failure(error.message, false, error.reason)
    yield* servers.lookup(target.server, target.tool).pipe(Effect.mapError(toFailure))
    yield* world
      .recordPerformance({
        effectId: row.effectId,
        kind: row.kind,
        attempt: row.attempts,
        onProcessLoss: replaySafe ? "replay-safe" : "process-bound"
      })
      .pipe(Effect.mapError((e) => worldFailure(e, row.kind)))
    return yield* servers
      .call({ server: target.server, tool: target.tool, arguments: payload.arguments, timeoutMs: mcpCallTimeoutMs })
      .pipe(Effect.mapError(toFailure))
  })

/** A refusal of the engine's front door as this effect's failure; storage and unavailability are retried. */
const dispatchFailure =
  (what: string, refusal: (error: { readonly message: string }) => string) => (error: DispatchError) =>
    Effect.fail(
      error._tag === "StorageFailure"
        ? storageFailure(`${what} not recorded: ${error.message}`, true, error.code)
        : error._tag === "EngineUnavailable"
          ? failure(`${what} not recorded: ${error.message}`, true)
          : failure(refusal(error), false)
    )

/**
 * A delegate is a command to another thread, with an id derived from this effect: done once. With
 * `await: true` the message names the waiting call (and the threads waiting above it), and this row
 * settles once the message is accepted: the call then waits in its thread's state (Delegation.ts).
 */
const delegate = (row: Outbox.OutboxRow, payload: DelegateCallPayload) =>
  Effect.gen(function* () {
    const engine = yield* Engine.Engine
    const world = yield* World
    const input = yield* Schema.decodeUnknown(DelegateInput)(payload.arguments).pipe(
      Effect.mapError((e) =>
        failure(`delegate: invalid arguments: ${describeIssues(ParseResult.ArrayFormatter.formatErrorSync(e))}`, false)
      )
    )
    yield* world
      .recordPerformance({ effectId: row.effectId, kind: row.kind, attempt: row.attempts })
      .pipe(Effect.mapError((e) => worldFailure(e, row.kind)))
    const commandId = delegationCommandId(row.effectId)
    const messageId = delegateMessageId(row.effectId)
    const awaitedBy =
      input.await === true
        ? {
            awaitedBy: {
              threadId: payload.threadId,
              turnId: payload.turnId,
              effectId: row.effectId,
              chain: payload.awaitChain ?? [payload.threadId]
            }
          }
        : {}
    const answer = yield* engine
      .dispatchWithReceipt(
        { commandId, type: "message.send", threadId: input.threadId, messageId, text: input.text, ...awaitedBy },
        { origin: "internal" }
      )
      .pipe(Effect.catchAll(dispatchFailure("delegate", delegateRefusal)))
    const sent = { threadId: input.threadId, commandId, messageId, sequence: answer.sequence }
    return input.await === true ? { ...sent, awaiting: true, turnId: turnIdOf(input.threadId, messageId) } : sent
  })

/**
 * An awaited turn's end (delegate.reply) to its waiting call, or a waiting turn's end (delegate.withdraw)
 * to the turn it awaited: one command under an id derived from this effect. A rejection is an answer
 * (the call already has its result, the turn is gone) and settles the row.
 */
const delegationCommand = (
  row: Outbox.OutboxRow,
  payload: DelegateReplyPayload | DelegateWithdrawPayload,
  type: "delegate.answer" | "delegation.withdraw"
) =>
  Effect.gen(function* () {
    const engine = yield* Engine.Engine
    return yield* engine
      .dispatchWithReceipt({ ...payload, commandId: delegationCommandId(row.effectId), type }, { origin: "internal" })
      .pipe(
        Effect.map((answer) => ({ delivered: true, sequence: answer.sequence })),
        Effect.catchAll((error) =>
          error._tag === "CommandRejected" || error._tag === "InvalidCommand"
            ? Effect.succeed({ delivered: false, reason: error.message })
            : dispatchFailure(type, (e) => `${type} refused: ${e.message}`)(error)
        )
      )
  })

/**
 * `trigger_edit` puts (or deletes) the trigger through the front door, under an id derived from this
 * effect, so a repeat is answered by its receipt; the store is the trigger's source of truth. A spec
 * the Trigger decider refuses (a bad cron or time zone) is the call's result, and nothing is written.
 * Then the world file mirrors the trigger, so the world shows from outside what was put.
 */
const triggerEdit = (row: Outbox.OutboxRow, payload: ToolCallPayload) =>
  Effect.gen(function* () {
    const engine = yield* Engine.Engine
    const invalid = (e: ParseResult.ParseError) =>
      failure(
        `trigger_edit: invalid arguments: ${describeIssues(ParseResult.ArrayFormatter.formatErrorSync(e))}`,
        false
      )
    const input = yield* Schema.decodeUnknown(TriggerEditInput)(payload.arguments).pipe(Effect.mapError(invalid))
    const spec =
      input.spec === null
        ? null
        : yield* Schema.decodeUnknown(TriggerSpec, { onExcessProperty: "error" })(input.spec).pipe(
            Effect.mapError((e) =>
              failure(
                `trigger_edit: invalid spec (expected { cron, timezone?, threadId, text }): ${describeIssues(ParseResult.ArrayFormatter.formatErrorSync(e))}`,
                false
              )
            )
          )
    const commandId = CommandId.boundedId("trigger-edit:", row.effectId)
    const command =
      spec === null
        ? { commandId, type: "trigger.delete", triggerId: input.triggerId }
        : { commandId, type: "trigger.put", triggerId: input.triggerId, ...spec }
    yield* engine
      .dispatchWithReceipt(command, { origin: "internal" })
      .pipe(
        Effect.mapError((error) =>
          error._tag === "StorageFailure"
            ? storageFailure(`trigger not recorded: ${error.message}`, true, error.code)
            : error._tag === "EngineUnavailable"
              ? failure(`trigger not recorded: ${error.message}`, true)
              : failure(
                  `trigger_edit refused: ${error.message}`,
                  false,
                  error._tag === "CommandRejected" ? error.reason : error._tag
                )
        )
      )
    const file = yield* worldTool(row, payload)
    const summary = yield* findTrigger(input.triggerId).pipe(
      Effect.mapError((e) => failure(`could not read the trigger back: ${e.message}`, true))
    )
    const nextFireAt = spec === null ? null : (summary?.nextFireAt ?? null)
    return {
      ...(file as object),
      deleted: spec === null,
      nextFireAt: nextFireAt === null ? null : new Date(nextFireAt).toISOString()
    }
  })

/** A tick: the message to the thread, under the tick's id (the effect id), so a repeated tick is a duplicate. */
const triggerFire = (row: Outbox.OutboxRow, { threadId, text }: TriggerFirePayload) =>
  Effect.gen(function* () {
    const engine = yield* Engine.Engine
    const messageId = `t-${createHash("sha256").update(row.effectId).digest("hex").slice(0, 40)}`
    const answer = yield* engine
      .dispatchWithReceipt(
        { commandId: row.effectId, type: "message.send", threadId, messageId, text },
        { origin: "internal" }
      )
      .pipe(
        Effect.mapError((error) =>
          error._tag === "StorageFailure"
            ? storageFailure(`trigger message not recorded: ${error.message}`, true, error.code)
            : error._tag === "EngineUnavailable"
              ? failure(`trigger message not recorded: ${error.message}`, true)
              : failure(
                  `thread '${threadId}' refused the trigger's message: ${error.message}`,
                  false,
                  error._tag === "CommandRejected" && error.reason === "thread-deleted" ? THREAD_DELETED : undefined
                )
        )
      )
    return { threadId, commandId: row.effectId, messageId, sequence: answer.sequence, duplicate: answer.duplicate }
  })

const worldTool = (row: Outbox.OutboxRow, payload: ToolCallPayload) =>
  Effect.gen(function* () {
    const world = yield* World
    return yield* world
      .perform({
        effectId: row.effectId,
        attempt: row.attempts,
        threadId: payload.threadId,
        tool: payload.name as WorldToolName,
        arguments: payload.arguments
      })
      .pipe(Effect.mapError((error) => worldFailure(error, row.kind)))
  })

const cleanup = (row: Outbox.OutboxRow, { threadId }: CleanupPayload) =>
  Effect.gen(function* () {
    const world = yield* World
    yield* world
      .recordPerformance({ effectId: row.effectId, kind: row.kind, attempt: row.attempts })
      .pipe(Effect.mapError((e) => worldFailure(e, row.kind)))
    return { cleaned: threadId }
  })

export type AgentServices = ModelProvider | World | McpServers.McpServers | Engine.Engine | FlushWindows | SqlClient

/**
 * A handler run on its row's payload as its kind writes it (`schema`, the decoder built once): a
 * payload of another shape fails the row for good, unperformed (Reactor.payloadOf).
 */
const withPayload = <A, I, R>(
  schema: Schema.Schema<A, I, never>,
  handler: (row: Outbox.OutboxRow, payload: A) => Effect.Effect<unknown, EffectFailure, R>
) => {
  const payloadOf = Reactor.payloadOf(schema)
  return (row: Outbox.OutboxRow) => Effect.flatMap(payloadOf(row), (payload) => handler(row, payload))
}

/**
 * The schema each kind's handler reads its row's payload with, one for every kind of the table in
 * Tools.ts: what its writer (a decider) puts in the row must decode with it (PayloadRoundTrip.test.ts).
 */
export const payloadSchemas = {
  "model.step": ModelStepPayload,
  "thread.cleanup": CleanupPayload,
  "tool.publish": ToolCallPayload,
  "tool.execute": ToolCallPayload,
  "tool.delegate": DelegateCallPayload,
  "tool.trigger_edit": ToolCallPayload,
  "tool.mcp_call": McpCallPayload,
  "trigger.fire": TriggerFirePayload,
  "delegate.reply": DelegateReplyPayload,
  "delegate.withdraw": DelegateWithdrawPayload
} as const satisfies { readonly [K in EffectKind]: Schema.Schema<any, any, never> }

const performModelStep = withPayload(payloadSchemas["model.step"], modelStep)
const performCleanup = withPayload(payloadSchemas["thread.cleanup"], cleanup)
const performDelegate = withPayload(payloadSchemas["tool.delegate"], delegate)
// `resend` counts a reply's or a withdraw's rows (Delegation's resend); the command does not carry it.
const performReply = withPayload(payloadSchemas["delegate.reply"], (row, { resend: _, ...payload }) =>
  delegationCommand(row, payload, "delegate.answer")
)
const performWithdraw = withPayload(payloadSchemas["delegate.withdraw"], (row, { resend: _, ...payload }) =>
  delegationCommand(row, payload, "delegation.withdraw")
)
const performMcpCall = withPayload(payloadSchemas["tool.mcp_call"], mcpCall)
const performTriggerEdit = withPayload(payloadSchemas["tool.trigger_edit"], triggerEdit)
const performTriggerFire = withPayload(payloadSchemas["trigger.fire"], triggerFire)
/** `tool.publish` and `tool.execute`: the world's own tools, one schema. */
const performWorldTool = withPayload(payloadSchemas["tool.publish"], worldTool)

export const handle = (row: Outbox.OutboxRow): Effect.Effect<unknown, EffectFailure, AgentServices> => {
  switch (row.kind) {
    case "model.step":
      return performModelStep(row)
    case "thread.cleanup":
      return performCleanup(row)
    case "tool.delegate":
      return performDelegate(row)
    case "delegate.reply":
      return performReply(row)
    case "delegate.withdraw":
      return performWithdraw(row)
    case "tool.mcp_call":
      return performMcpCall(row)
    case "tool.trigger_edit":
      return performTriggerEdit(row)
    case "trigger.fire":
      return performTriggerFire(row)
    default:
      return performWorldTool(row)
  }
}

export const agentsReactor = (
  options: { readonly concurrency?: number } = {}
): Reactor.ReactorDefinition<AgentServices> => ({
  name: "agents",
  kinds,
  concurrency: options.concurrency ?? 8,
  lease: "30 seconds",
  retry: { maxAttempts: 5, backoff: "exponential", base: "1 second", cap: "30 seconds" },
  // A defect in a handler is stored as the row's failure by the reactor, with its text.
  handle
})
