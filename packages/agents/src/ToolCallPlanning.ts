/**
 * From a model's response to the calls a turn records and the effects that perform them. Providers
 * reuse call ids (within one response, across steps, across turns), so each call gets a transcript
 * id no earlier call of the thread has; an unknown tool becomes an error result the model reads,
 * never a crash and never an effect. Deterministic: the same response in the same state always
 * plans the same ids.
 */
import { CommandId, type EffectIntent } from "@orchestration/engine"
import { HashSet, Schema } from "effect"
import { type ActiveTurn, type CallRecord, type ThreadEvent, toolEffectId } from "./ThreadEvents.js"
import { McpTarget, parseOfferedName } from "./McpTools.js"
import { isToolName, type ToolName, toolKind } from "./Tools.js"

/** The payload of a planned call's row (`tool.<name>`): the call, in its thread's turn. */
export const ToolCallPayload = Schema.Struct({
  threadId: Schema.String,
  turnId: Schema.String,
  callId: Schema.String,
  name: Schema.String,
  arguments: Schema.Unknown
})
export type ToolCallPayload = typeof ToolCallPayload.Type

/**
 * The payload of a `tool.mcp_call` row: the call, and the server, tool and policy it was planned
 * for (without them its performer reads the server and tool from the name, and the call is process-bound).
 */
export const McpCallPayload = Schema.Struct({ ...ToolCallPayload.fields, mcp: Schema.optional(McpTarget) })
export type McpCallPayload = typeof McpCallPayload.Type

/** A tool call as a provider answers it. */
export interface ResponseCall {
  readonly id: string
  readonly name: string
  readonly arguments: unknown
  /** For an MCP tool: the server, tool and policy the step found in the tool's annotations. */
  readonly mcp?: McpTarget | undefined
}

const safeCallId = (id: string) => (/^[A-Za-z0-9._-]{1,64}$/.test(id) ? id : CommandId.boundedId("c-", id, 0))

/**
 * An id for a call that no earlier call of the thread has: providers reuse ids (within one response,
 * across steps, across turns), and the transcript, the effect id and the read model's key must not.
 * Deterministic: the same response in the same state always gets the same ids.
 */
export const uniqueCallId = (
  callId: string,
  ordinal: number,
  used: { readonly has: (id: string) => boolean }
): string => {
  if (!used.has(callId)) return callId
  const inTurn = `${callId}_t${ordinal}`
  if (!used.has(inTurn)) return inTurn
  let n = 2
  while (used.has(`${inTurn}_${n}`)) n++
  return `${inTurn}_${n}`
}

export interface PlannedCalls {
  readonly calls: ReadonlyArray<CallRecord>
  /** One error result for each call of a tool that does not exist. */
  readonly unknownResults: ReadonlyArray<ThreadEvent>
  /** One effect for each call of a known tool. */
  readonly effects: ReadonlyArray<EffectIntent>
}

/** Pure: the calls of a response, with thread-unique transcript ids, their effects and unknown-tool results. */
export const planCalls = (
  threadId: string,
  active: ActiveTurn,
  transcriptIds: HashSet.HashSet<string>,
  toolCalls: ReadonlyArray<ResponseCall>,
  now: number
): PlannedCalls => {
  // The thread's ids and this response's, without copying the thread's (it may hold tens of thousands).
  const planned = new Set<string>()
  const used = { has: (id: string) => planned.has(id) || HashSet.has(transcriptIds, id) }
  const calls = toolCalls.map((call, index): CallRecord => {
    const callId = safeCallId(call.id || `call_${active.step}_${index}`)
    const transcriptId = uniqueCallId(callId, active.ordinal, used)
    planned.add(transcriptId)
    return {
      callId,
      transcriptId,
      effectId: toolEffectId(active.turnId, transcriptId),
      name: call.name,
      arguments: call.arguments ?? {},
      at: now
    }
  })
  // A name of the form <server>__<tool> is an MCP call; whether it exists is for its performer to say.
  const known = (name: string) => isToolName(name) || parseOfferedName(name) !== undefined
  const unknownResults = calls
    .filter((c) => !known(c.name))
    .map(
      (c): ThreadEvent => ({
        type: "tool.result",
        turnId: active.turnId,
        result: {
          callId: c.callId,
          transcriptId: c.transcriptId,
          effectId: c.effectId,
          content: `error: unknown tool '${c.name}'`,
          outcome: "unknown-tool"
        }
      })
    )
  const effects = calls.flatMap((c, index): Array<EffectIntent> => {
    const payload: ToolCallPayload = {
      threadId,
      turnId: active.turnId,
      callId: c.callId,
      name: c.name,
      arguments: c.arguments
    }
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
  return { calls, unknownResults, effects }
}
