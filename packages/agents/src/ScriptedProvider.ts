/**
 * A deterministic model for tests and the demo. The turn's user message may carry a script,
 * `{"script": [step, ...]}`; the n-th model step of that turn answers the n-th script step:
 * - `{"toolCalls": [{"name": "...", "arguments": {...}}], "text"?: "..."}` → those tool calls,
 *   with ids `call_<n>_<index>` (n = 1-based step number within the turn, index = 0-based
 *   position in the step), so the same transcript always yields the same ids;
 * - `{"text": "..."}` → that text and no tool calls.
 * Either may stream: `"chunks": ["Hel", "lo"]` are its text deltas, in order (the text defaults to
 * their concatenation and must equal it when given), `"chunkDelayMs": n` waits n ms before each one
 * on the Effect clock (so a TestClock drives it). Without chunks the text streams as one delta.
 * Once the script is exhausted the answer is the text "done". A message that is not a script is
 * answered "echo: <text>" with no tool calls. The answer depends on the transcript only.
 */
import { Effect, Either, Layer, Schema, Stream } from "effect"
import {
  ModelProvider,
  type ModelProviderShape,
  type ModelStepPart,
  type ModelStepRequest,
  type ModelStepResponse,
  ProviderError
} from "./Provider.js"
import type { TranscriptMessage } from "./Transcript.js"

const ScriptToolCall = Schema.Struct({
  name: Schema.String,
  arguments: Schema.optionalWith(Schema.Unknown, { default: () => ({}) })
})

const Streaming = {
  chunks: Schema.optional(Schema.Array(Schema.String)),
  chunkDelayMs: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(0, 600_000)))
}

const ScriptStep = Schema.Union(
  Schema.Struct({ toolCalls: Schema.Array(ScriptToolCall), text: Schema.optional(Schema.String), ...Streaming }),
  Schema.Struct({ text: Schema.optional(Schema.String), ...Streaming })
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

/** A scripted step: its response and the deltas it streams (each after `delayMs`). */
export interface ScriptedStep {
  readonly response: ModelStepResponse
  readonly chunks: ReadonlyArray<string>
  readonly delayMs: number
}

const whole = (response: ModelStepResponse): ScriptedStep => ({
  response,
  chunks: response.text === "" ? [] : [response.text],
  delayMs: 0
})

/**
 * The scripted step for a transcript, or why there is none (no user message, a malformed step).
 * The turn starts at the latest user message; its step number counts the assistant messages after it.
 */
export const scriptedStep = (transcript: ReadonlyArray<TranscriptMessage>): Either.Either<ScriptedStep, string> => {
  let userIndex = transcript.length - 1
  while (userIndex >= 0 && transcript[userIndex]?.role !== "user") userIndex--
  const user = transcript[userIndex]
  if (user === undefined || user.role !== "user") return Either.left("the transcript has no user message")
  const step = transcript.slice(userIndex + 1).filter((message) => message.role === "assistant").length + 1

  const script = parseScript(user.content)
  if (script === undefined) return Either.right(whole({ text: `echo: ${user.content}`, toolCalls: [] }))
  const raw = script[step - 1]
  if (raw === undefined) return Either.right(whole({ text: exhaustedText, toolCalls: [] }))

  return Schema.decodeUnknownEither(ScriptStep)(raw).pipe(
    Either.mapLeft((error) => `script step ${step} is malformed: ${error.message}`),
    Either.flatMap((decoded): Either.Either<ScriptedStep, string> => {
      const joined = decoded.chunks?.join("")
      const text = decoded.text ?? joined
      if (text === undefined && !("toolCalls" in decoded)) {
        return Either.left(`script step ${step} is malformed: it needs "text", "chunks" or "toolCalls"`)
      }
      if (joined !== undefined && text !== joined) {
        return Either.left(`script step ${step} is malformed: its chunks do not concatenate to its text`)
      }
      const response: ModelStepResponse = {
        text: text ?? "",
        toolCalls:
          "toolCalls" in decoded
            ? decoded.toolCalls.map((call, index) => ({
                id: scriptedCallId(step, index),
                name: call.name,
                arguments: call.arguments
              }))
            : []
      }
      return Either.right(
        decoded.chunks === undefined
          ? { ...whole(response), delayMs: decoded.chunkDelayMs ?? 0 }
          : { response, chunks: decoded.chunks.filter((c) => c.length > 0), delayMs: decoded.chunkDelayMs ?? 0 }
      )
    })
  )
}

/** The scripted answer to a transcript (its step's response), or why there is none. */
export const scriptedAnswer = (
  transcript: ReadonlyArray<TranscriptMessage>
): Either.Either<ModelStepResponse, string> => Either.map(scriptedStep(transcript), (step) => step.response)

const invalid = (request: ModelStepRequest, message: string) =>
  new ProviderError({ provider: "scripted", requestId: request.requestId, reason: "invalid-request", message })

/** Code points per argument delta of a scripted tool call (a pair is never cut). */
export const argumentDeltaSize = 8

/** Pure: the argument deltas of a tool call, its arguments' JSON cut into pieces, as a provider streams them. */
export const argumentDeltas = (call: ModelStepResponse["toolCalls"][number]): ReadonlyArray<ModelStepPart> => {
  const points = Array.from(JSON.stringify(call.arguments ?? {}))
  const parts: Array<ModelStepPart> = []
  for (let i = 0; i < points.length; i += argumentDeltaSize) {
    const delta = points.slice(i, i + argumentDeltaSize).join("")
    parts.push({ type: "tool-call-delta", callId: call.id, name: call.name, delta })
  }
  return parts
}

/** The step's deltas (text, then each tool call's arguments), each after its delay on the Effect clock, then its response. */
const streamStep = (request: ModelStepRequest): Stream.Stream<ModelStepPart, ProviderError> =>
  Either.match(scriptedStep(request.transcript), {
    onLeft: (message) => Stream.fail(invalid(request, message)),
    onRight: (step) =>
      Stream.concat(
        Stream.fromIterable<ModelStepPart>([
          ...step.chunks.map((text) => ({ type: "text-delta" as const, text })),
          ...step.response.toolCalls.flatMap(argumentDeltas)
        ]).pipe(
          Stream.mapEffect((part) => Effect.as(step.delayMs > 0 ? Effect.sleep(step.delayMs) : Effect.void, part))
        ),
        Stream.succeed<ModelStepPart>({ type: "finished", response: step.response })
      )
  })

export const make: ModelProviderShape = {
  step: (request) =>
    Either.match(scriptedAnswer(request.transcript), {
      onLeft: (message) => Effect.fail(invalid(request, message)),
      onRight: Effect.succeed
    }),
  stream: streamStep
}

export const layer: Layer.Layer<ModelProvider> = Layer.succeed(ModelProvider, make)
