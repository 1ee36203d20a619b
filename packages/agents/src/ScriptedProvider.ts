/**
 * A deterministic model for tests and the demo. The turn's user message may carry a script,
 * `{"script": [step, ...]}`; the n-th model step of that turn answers the n-th script step:
 * - `{"toolCalls": [{"name": "...", "arguments": {...}}], "text"?: "..."}` → those tool calls,
 *   with ids `call_<n>_<index>` (n = 1-based step number within the turn, index = 0-based
 *   position in the step), so the same transcript always yields the same ids;
 * - `{"text": "..."}` → that text and no tool calls.
 * Once the script is exhausted the answer is the text "done". A message that is not a script is
 * answered "echo: <text>" with no tool calls. The answer depends on the transcript only.
 */
import { Effect, Either, Layer, Schema } from "effect"
import { ModelProvider, type ModelProviderShape, type ModelStepResponse, ProviderError } from "./Provider.js"
import type { TranscriptMessage } from "./Transcript.js"

const ScriptToolCall = Schema.Struct({
  name: Schema.String,
  arguments: Schema.optionalWith(Schema.Unknown, { default: () => ({}) })
})

const ScriptStep = Schema.Union(
  Schema.Struct({ toolCalls: Schema.Array(ScriptToolCall), text: Schema.optional(Schema.String) }),
  Schema.Struct({ text: Schema.String })
)
export type ScriptStep = typeof ScriptStep.Encoded

/** The id of the index-th call (0-based) of a turn's n-th step (1-based). */
export const scriptedCallId = (step: number, index: number): string => `call_${step}_${index}`

/** The text a scripted turn ends with once its script is exhausted. */
export const exhaustedText = "done"

/** The script carried by a user message, or undefined when the message is ordinary text. */
export const parseScript = (text: string): ReadonlyArray<unknown> | undefined => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    // swallow-ok: text that is not JSON is an ordinary message, answered with an echo
    return undefined
  }
  if (typeof value !== "object" || value === null || !("script" in value)) return undefined
  return Array.isArray(value.script) ? value.script : undefined
}

/**
 * The scripted answer to a transcript, or why there is none (no user message, a malformed step).
 * The turn starts at the latest user message; its step number counts the assistant messages after it.
 */
export const scriptedAnswer = (
  transcript: ReadonlyArray<TranscriptMessage>
): Either.Either<ModelStepResponse, string> => {
  let userIndex = transcript.length - 1
  while (userIndex >= 0 && transcript[userIndex]?.role !== "user") userIndex--
  const user = transcript[userIndex]
  if (user === undefined || user.role !== "user") return Either.left("the transcript has no user message")
  const step = transcript.slice(userIndex + 1).filter((message) => message.role === "assistant").length + 1

  const script = parseScript(user.content)
  if (script === undefined) return Either.right({ text: `echo: ${user.content}`, toolCalls: [] })
  const raw = script[step - 1]
  if (raw === undefined) return Either.right({ text: exhaustedText, toolCalls: [] })

  return Schema.decodeUnknownEither(ScriptStep)(raw).pipe(
    Either.mapLeft((error) => `script step ${step} is malformed: ${error.message}`),
    Either.map(
      (decoded): ModelStepResponse =>
        "toolCalls" in decoded
          ? {
              text: decoded.text ?? "",
              toolCalls: decoded.toolCalls.map((call, index) => ({
                id: scriptedCallId(step, index),
                name: call.name,
                arguments: call.arguments
              }))
            }
          : { text: decoded.text, toolCalls: [] }
    )
  )
}

export const make: ModelProviderShape = {
  step: (request) =>
    Either.match(scriptedAnswer(request.transcript), {
      onLeft: (message) =>
        Effect.fail(
          new ProviderError({ provider: "scripted", requestId: request.requestId, reason: "invalid-request", message })
        ),
      onRight: Effect.succeed
    })
}

export const layer: Layer.Layer<ModelProvider> = Layer.succeed(ModelProvider, make)
