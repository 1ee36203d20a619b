/**
 * The provider-ready transcript, in OpenAI chat format, and the validator that enforces what real
 * providers enforce when a transcript is replayed: every call has exactly one result and every result
 * its call. A transcript with a dangling call or an orphan result is refused by a real provider on
 * replay ("No tool call found for function call output"); `validateTranscript` reports exactly those
 * states, so tests can prove every transcript we derive is accepted.
 */
import { Schema } from "effect"

/** One function call requested by the model; `arguments` is a JSON text, as OpenAI sends it. */
export const ToolCall = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("function"),
  function: Schema.Struct({
    name: Schema.String,
    arguments: Schema.String
  })
})
export type ToolCall = typeof ToolCall.Type

export const UserMessage = Schema.Struct({
  role: Schema.Literal("user"),
  content: Schema.String
})
export type UserMessage = typeof UserMessage.Type

/** `content` is null when the model answered with tool calls only, as in OpenAI's chat format. */
export const AssistantMessage = Schema.Struct({
  role: Schema.Literal("assistant"),
  content: Schema.NullOr(Schema.String),
  tool_calls: Schema.optional(Schema.Array(ToolCall))
})
export type AssistantMessage = typeof AssistantMessage.Type

/** The result of one call; `content` is the tool's answer as text (JSON for our tools). */
export const ToolMessage = Schema.Struct({
  role: Schema.Literal("tool"),
  tool_call_id: Schema.String,
  content: Schema.String
})
export type ToolMessage = typeof ToolMessage.Type

export const TranscriptMessage = Schema.Union(UserMessage, AssistantMessage, ToolMessage)
export type TranscriptMessage = typeof TranscriptMessage.Type

export const Transcript = Schema.Array(TranscriptMessage)
export type Transcript = typeof Transcript.Type

/** The closed set of rule violations; each maps to a rejection a provider gives on replay. */
export type TranscriptProblemCode =
  | "duplicate-call-id"
  | "empty-tool-calls"
  | "invalid-arguments"
  | "unanswered-call"
  | "orphan-result"
  | "duplicate-result"
  | "result-out-of-place"

export interface TranscriptProblem {
  /** Index of the message where the problem sits (for an unanswered call: the assistant message). */
  readonly index: number
  readonly code: TranscriptProblemCode
  readonly message: string
  readonly callId?: string
}

export interface TranscriptValidation {
  readonly valid: boolean
  readonly problems: ReadonlyArray<TranscriptProblem>
}

export interface ValidateOptions {
  /**
   * Accept calls still open at the very end (a turn in progress whose tools are running).
   * A transcript sent to a provider never has them, so the default is false.
   */
  readonly allowTrailingOpenCalls?: boolean
}

interface CallRecord {
  readonly index: number
  answered: boolean
}

/**
 * Checks the replay rules:
 * - tool call ids are unique across the transcript;
 * - every call is answered by exactly one `tool` message before the next user or assistant message;
 * - a `tool` message answers a call of the assistant message it follows, never a missing call
 *   ("No tool call found for function call output") and never a call already answered;
 * - an assistant message carries no empty `tool_calls` list and its arguments are JSON.
 * Pure: it reports every problem it finds, in transcript order, and never throws.
 */
export const validateTranscript = (
  messages: ReadonlyArray<TranscriptMessage>,
  options: ValidateOptions = {}
): TranscriptValidation => {
  const problems: Array<TranscriptProblem> = []
  const calls = new Map<string, CallRecord>()
  // Calls of the assistant message whose results may follow now; closed by the next user/assistant.
  let open = new Map<string, CallRecord>()

  const closeOpenCalls = () => {
    for (const [callId, call] of open) {
      if (!call.answered) {
        problems.push({
          index: call.index,
          code: "unanswered-call",
          callId,
          message: `Tool call ${callId} has no result before the next user or assistant message`
        })
      }
    }
    open = new Map()
  }

  messages.forEach((message, index) => {
    switch (message.role) {
      case "user": {
        closeOpenCalls()
        return
      }
      case "assistant": {
        closeOpenCalls()
        const toolCalls = message.tool_calls
        if (toolCalls === undefined) return
        if (toolCalls.length === 0) {
          problems.push({
            index,
            code: "empty-tool-calls",
            message: "An assistant message has an empty tool_calls list"
          })
        }
        for (const call of toolCalls) {
          if (calls.has(call.id)) {
            problems.push({
              index,
              code: "duplicate-call-id",
              callId: call.id,
              message: `Tool call id ${call.id} is already used by message ${calls.get(call.id)?.index}`
            })
          }
          if (!isJson(call.function.arguments)) {
            problems.push({
              index,
              code: "invalid-arguments",
              callId: call.id,
              message: `Arguments of tool call ${call.id} are not valid JSON`
            })
          }
          // Repeated within one message: one call for matching purposes. Repeated from an earlier
          // message: it opens again here, so its own result matches and only the id is reported.
          if (open.has(call.id)) continue
          const record: CallRecord = { index, answered: false }
          calls.set(call.id, record)
          open.set(call.id, record)
        }
        return
      }
      case "tool": {
        const callId = message.tool_call_id
        const current = open.get(callId)
        const earlier = calls.get(callId)
        if (current !== undefined && !current.answered) {
          current.answered = true
        } else if (earlier === undefined) {
          problems.push({
            index,
            code: "orphan-result",
            callId,
            message: `No tool call found for function call output with call_id ${callId}`
          })
        } else if (earlier.answered) {
          problems.push({
            index,
            code: "duplicate-result",
            callId,
            message: `Tool call ${callId} already has a result`
          })
        } else {
          problems.push({
            index,
            code: "result-out-of-place",
            callId,
            message: `Result for tool call ${callId} (message ${earlier.index}) comes after a later user or assistant message`
          })
        }
        return
      }
    }
  })

  if (options.allowTrailingOpenCalls !== true) closeOpenCalls()
  // Unanswered calls are found when their block closes; a stable sort restores transcript order.
  const ordered = [...problems].sort((a, b) => a.index - b.index)
  return { valid: ordered.length === 0, problems: ordered }
}

const isJson = (text: string): boolean => {
  try {
    JSON.parse(text)
    return true
  } catch {
    // swallow-ok: the failure is the answer (reported as invalid-arguments by the caller)
    return false
  }
}
