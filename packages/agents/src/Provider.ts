/**
 * The one adapter interface between a turn and a model. A step takes the provider-ready transcript
 * and the tool definitions and answers text and tool calls; it never performs a tool, because
 * tools run as effects through the outbox. Adapters map their own failures into `ProviderError`
 * once, at their boundary.
 */
import { Context, type Effect, Schema } from "effect"
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

export interface ModelProviderShape {
  readonly step: (request: ModelStepRequest) => Effect.Effect<ModelStepResponse, ProviderError>
}

export class ModelProvider extends Context.Tag("agents/ModelProvider")<ModelProvider, ModelProviderShape>() {}

/** The request id of a turn's n-th model step (1-based): the same as that step's effect id. */
export const stepRequestId = (turnId: string, n: number): string => `step:${turnId}#${n}`
