/**
 * What the server needs from a domain that has threads: the read views behind
 * `GET /v1/threads/:threadId` and `/transcript`. The server owns the routes and their shapes; the
 * domain (packages/agents) owns how they are computed from its projections and the log.
 */
import type { StorageFailure } from "@orchestration/engine"
import { Context, type Effect, type Option, Schema } from "effect"

export const ToolCallView = Schema.Struct({
  callId: Schema.String,
  name: Schema.String,
  effectId: Schema.String,
  status: Schema.String,
  result: Schema.optional(Schema.Unknown)
})

export const TurnView = Schema.Struct({
  turnId: Schema.String,
  status: Schema.String,
  reason: Schema.optional(Schema.String),
  /** How many model steps the turn took. */
  steps: Schema.Number,
  toolCalls: Schema.Array(ToolCallView)
})

/** `GET /v1/threads/:threadId`. A deleted thread is still found, with status `deleted`. */
export const ThreadView = Schema.Struct({
  threadId: Schema.String,
  title: Schema.String,
  status: Schema.String,
  turns: Schema.Array(TurnView),
  /** The transcript's messages (OpenAI chat format). */
  messages: Schema.Array(Schema.Unknown)
})
export type ThreadView = typeof ThreadView.Type

/** `GET /v1/threads/:threadId/transcript`: the provider-ready transcript and its validation. */
export const TranscriptView = Schema.Struct({
  messages: Schema.Array(Schema.Unknown),
  valid: Schema.Boolean,
  problems: Schema.Array(Schema.Unknown)
})
export type TranscriptView = typeof TranscriptView.Type

export interface ThreadViewsShape {
  /** None when no thread has that id (404). */
  readonly getThread: (threadId: string) => Effect.Effect<Option.Option<ThreadView>, StorageFailure>
  /** None when no thread has that id (404). */
  readonly getTranscript: (threadId: string) => Effect.Effect<Option.Option<TranscriptView>, StorageFailure>
}

export class ThreadViews extends Context.Tag("server/ThreadViews")<ThreadViews, ThreadViewsShape>() {}
