/**
 * The one adapter interface between a turn and a model. A step takes the provider-ready transcript
 * and the tool definitions and answers text and tool calls; it never performs a tool, because
 * tools run as effects through the outbox. Adapters map their own failures into `ProviderError`
 * once, at their boundary.
 */
import { Context, Effect, Schema, Stream } from "effect"
import type { ToolDefinition } from "./Tools.js"
import type { TranscriptMessage } from "./Transcript.js"

/** A call the model asked for; `arguments` is the decoded JSON value, not yet validated. */
export interface ModelToolCall {
  readonly id: string
  readonly name: string
  readonly arguments: unknown
}

export interface ModelStepRequest {
  /** `step:<turnId>#<n>`; the same step asked again carries the same id (see `stepRequestId`). */
  readonly requestId: string
  readonly transcript: ReadonlyArray<TranscriptMessage>
  readonly tools: ReadonlyArray<ToolDefinition>
}

export interface ModelStepResponse {
  readonly text: string
  readonly toolCalls: ReadonlyArray<ModelToolCall>
}

/**
 * Why a step failed:
 * - `rejected`: the provider refused the request (4xx other than 408/429), e.g. an invalid transcript;
 * - `unavailable`: transport failure, timeout, rate limit or 5xx: asking again may succeed;
 * - `malformed-response`: the answer could not be decoded;
 * - `invalid-request`: we could not build a request from the transcript (or script).
 */
export const ProviderErrorReason = Schema.Literal("rejected", "unavailable", "malformed-response", "invalid-request")
export type ProviderErrorReason = typeof ProviderErrorReason.Type

export class ProviderError extends Schema.TaggedError<ProviderError>()("ProviderError", {
  provider: Schema.String,
  requestId: Schema.String,
  reason: ProviderErrorReason,
  /** The HTTP status when the provider answered with one. */
  status: Schema.optional(Schema.Number),
  message: Schema.String
}) {}

/**
 * What a streaming step yields as it goes: text deltas, argument deltas of a tool call, and last
 * the whole response (`finished`), which is what gets recorded; the deltas are only its preview.
 */
export type ModelStepPart =
  | { readonly type: "text-delta"; readonly text: string }
  | { readonly type: "tool-call-delta"; readonly callId: string; readonly name: string; readonly delta: string }
  | { readonly type: "finished"; readonly response: ModelStepResponse }

export interface ModelProviderShape {
  readonly step: (request: ModelStepRequest) => Effect.Effect<ModelStepResponse, ProviderError>
  /** The step as it streams; an adapter without one is streamed as its whole answer (`streamOf`). */
  readonly stream?: ((request: ModelStepRequest) => Stream.Stream<ModelStepPart, ProviderError>) | undefined
}

/** The provider's stream of a step, or its one-shot answer as a single delta and its end. */
export const streamOf = (
  provider: ModelProviderShape,
  request: ModelStepRequest
): Stream.Stream<ModelStepPart, ProviderError> =>
  provider.stream !== undefined
    ? provider.stream(request)
    : Stream.flatMap(Stream.fromEffect(provider.step(request)), (response) =>
        Stream.fromIterable<ModelStepPart>([
          ...(response.text === "" ? [] : [{ type: "text-delta" as const, text: response.text }]),
          { type: "finished", response }
        ])
      )

/**
 * Runs a step's stream, handing each part to `onPart` in order, and answers its final response.
 * A stream that ends without one is a malformed answer, never an empty one.
 */
export const runStream = <E, R>(
  request: ModelStepRequest,
  provider: string,
  parts: Stream.Stream<ModelStepPart, ProviderError>,
  onPart: (part: ModelStepPart) => Effect.Effect<void, E, R>
): Effect.Effect<ModelStepResponse, ProviderError | E, R> =>
  Effect.gen(function* () {
    let response: ModelStepResponse | undefined
    yield* Stream.runForEach(parts, (part) =>
      part.type === "finished" ? Effect.sync(() => void (response = part.response)) : onPart(part)
    )
    if (response !== undefined) return response
    return yield* new ProviderError({
      provider,
      requestId: request.requestId,
      reason: "malformed-response",
      message: "the stream ended without a final response"
    })
  })

export class ModelProvider extends Context.Tag("agents/ModelProvider")<ModelProvider, ModelProviderShape>() {}

/** The request id of a turn's n-th model step (1-based): the same as that step's effect id. */
export const stepRequestId = (turnId: string, n: number): string => `step:${turnId}#${n}`
