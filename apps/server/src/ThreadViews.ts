/**
 * What the server needs from a domain that has threads: the read views behind `GET /v1/threads`
 * (a page of threads), `GET /v1/threads/:threadId` and `/transcript`, and `GET /v1/triggers`. The server owns the routes and their shapes; the
 * domain (packages/agents) owns how they are computed from its projections and the log.
 */
import type { StorageFailure } from "@orchestration/engine"
import { Context, type Effect, type Option, Schema } from "effect"
import type { ThreadStreamRules } from "./ThreadStream.js"

export const ToolCallView = Schema.Struct({
  callId: Schema.String,
  /** The id the transcript's assistant message gives this call (links a transcript entry to its effect). */
  transcriptId: Schema.optional(Schema.String),
  name: Schema.String,
  effectId: Schema.String,
  /** pending | running while the effect is unsettled; then its final succeeded | failed | cancelled, kept after retention. */
  status: Schema.String,
  result: Schema.optional(Schema.Unknown),
  /** What the model was told: succeeded | failed | interrupted | cancelled | unknown-tool | storage | denied. */
  outcome: Schema.optional(Schema.String),
  /** A call that waited for an operator: awaiting | approved | denied | expired | cancelled, its deadline (epoch ms) and note. */
  approval: Schema.optional(
    Schema.Struct({ status: Schema.String, deadline: Schema.Number, note: Schema.NullOr(Schema.String) })
  )
})

export const TurnView = Schema.Struct({
  turnId: Schema.String,
  status: Schema.String,
  reason: Schema.optional(Schema.String),
  /** How many model steps the turn took. */
  steps: Schema.Number,
  toolCalls: Schema.Array(ToolCallView)
})

/** A stored transcript message that cannot be read (cut off, hand-edited): its stored position (from 1) and why. */
export const UnreadableMessage = Schema.Struct({ position: Schema.Number, why: Schema.String })

/** `GET /v1/threads/:threadId`. A deleted thread is still found, with status `deleted`. */
export const ThreadView = Schema.Struct({
  threadId: Schema.String,
  title: Schema.String,
  status: Schema.String,
  turns: Schema.Array(TurnView),
  /** The transcript's messages (OpenAI chat format) that can be read. */
  messages: Schema.Array(Schema.Unknown),
  /** Present when some stored messages cannot be read: they are not in `messages`. */
  unreadableMessages: Schema.optional(Schema.Array(UnreadableMessage))
})
export type ThreadView = typeof ThreadView.Type

/** `GET /v1/threads/:threadId/transcript`: the provider-ready transcript and its validation. */
export const TranscriptView = Schema.Struct({
  messages: Schema.Array(Schema.Unknown),
  /** False too while a message cannot be read: a transcript with a hole cannot be replayed. */
  valid: Schema.Boolean,
  problems: Schema.Array(Schema.Unknown),
  /** Present when some stored messages cannot be read: they are not in `messages`. */
  unreadableMessages: Schema.optional(Schema.Array(UnreadableMessage))
})
export type TranscriptView = typeof TranscriptView.Type

/** One thread in the list: its latest turn and when it last made progress (its newest event). */
export const ThreadSummary = Schema.Struct({
  threadId: Schema.String,
  title: Schema.NullOr(Schema.String),
  status: Schema.String,
  /** The list's order and its cursor: the sequence of the thread's last status change. */
  updatedSequence: Schema.Number,
  turnCount: Schema.Number,
  queuedTurns: Schema.Number,
  lastSequence: Schema.Number,
  /** Epoch ms of the thread's newest event. */
  lastEventAt: Schema.Number,
  /** The running turn, else the newest; null before the first message. */
  latestTurn: Schema.NullOr(
    Schema.Struct({
      turnId: Schema.String,
      status: Schema.String,
      reason: Schema.NullOr(Schema.String),
      steps: Schema.Number,
      queuedAt: Schema.Number,
      updatedAt: Schema.Number
    })
  )
})
export type ThreadSummary = typeof ThreadSummary.Type

/** The statuses a thread list may be filtered by. */
export const ThreadStatus = Schema.Literal("idle", "running", "deleted")

/** `GET /v1/threads`: newest (or oldest) first; `next` is the `after` of the following page, null on the last. */
export const ThreadPage = Schema.Struct({
  threads: Schema.Array(ThreadSummary),
  next: Schema.NullOr(Schema.Number),
  /** Threads in each status, over all threads (not just this page). */
  counts: Schema.Record({ key: Schema.String, value: Schema.Number })
})
export type ThreadPage = typeof ThreadPage.Type

/** Newest first (default), or oldest first: the longest-running threads, likeliest to be stuck. */
export const ThreadOrder = Schema.Literal("newest", "oldest")

export interface ThreadListRequest {
  readonly limit: number
  readonly after?: number | undefined
  readonly status?: typeof ThreadStatus.Type | undefined
  readonly order?: typeof ThreadOrder.Type | undefined
}

/** One trigger of `GET /v1/triggers`: its schedule, its thread, and when it fires next. */
export const TriggerSummary = Schema.Struct({
  triggerId: Schema.String,
  cron: Schema.String,
  timezone: Schema.String,
  threadId: Schema.String,
  text: Schema.String,
  /** ISO time of the next tick; null when the cron has no later time. */
  nextFireAt: Schema.NullOr(Schema.String),
  lastFiredAt: Schema.NullOr(Schema.String),
  /** How the last tick's message went: succeeded, failed, cancelled; null before the first. */
  lastDelivery: Schema.NullOr(Schema.String)
})
export type TriggerSummary = typeof TriggerSummary.Type

/** `GET /v1/triggers`: the triggers that are not deleted, soonest next fire first. */
export const TriggerList = Schema.Struct({ triggers: Schema.Array(TriggerSummary) })
export type TriggerList = typeof TriggerList.Type

/** A call waiting for an operator's `tool.approve` / `tool.deny`. */
export const PendingApproval = Schema.Struct({
  threadId: Schema.String,
  turnId: Schema.String,
  /** The `callId` to name in `tool.approve` / `tool.deny`. */
  callId: Schema.String,
  name: Schema.String,
  arguments: Schema.Unknown,
  /** Present when the stored arguments could not be read (then `arguments` is null): why. */
  undecodable: Schema.optional(Schema.String),
  effectId: Schema.String,
  /** Epoch ms: unanswered by then, the call is denied ("no approval within …"). */
  deadline: Schema.Number
})

/** `GET /v1/approvals`: the calls awaiting approval, earliest deadline first. */
export const ApprovalList = Schema.Struct({ approvals: Schema.Array(PendingApproval) })
export type ApprovalList = typeof ApprovalList.Type

export interface ApprovalListRequest {
  readonly limit: number
  readonly threadId?: string | undefined
}

export interface ThreadViewsShape {
  /** Calls awaiting approval. Absent: the approvals route answers 404. */
  readonly listApprovals?: (request: ApprovalListRequest) => Effect.Effect<ApprovalList, StorageFailure>
  /** A page of threads, bounded by `limit` whatever their number. Absent: the list route answers 404. */
  readonly listThreads?: (request: ThreadListRequest) => Effect.Effect<ThreadPage, StorageFailure>
  /** None when no thread has that id (404). */
  readonly getThread: (threadId: string) => Effect.Effect<Option.Option<ThreadView>, StorageFailure>
  /** The domain's triggers, at most `limit`. Absent: the route answers 404. */
  readonly listTriggers?: (request: { readonly limit: number }) => Effect.Effect<TriggerList, StorageFailure>
  /** None when no thread has that id (404). */
  readonly getTranscript: (threadId: string) => Effect.Effect<Option.Option<TranscriptView>, StorageFailure>
  /** How the thread's events move its live model step (GET /v1/threads/:id/stream). Absent: events only. */
  readonly streamRules?: ThreadStreamRules
}

export class ThreadViews extends Context.Tag("server/ThreadViews")<ThreadViews, ThreadViewsShape>() {}
