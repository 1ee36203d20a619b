/**
 * The HTTP contract as one HttpApi: every route, its parameters, success shape and the
 * errors it may answer with. OpenAPI at /openapi.json and the docs UI at /docs are generated from it,
 * and tests call it through a typed HttpApiClient. Handlers live next door, one module per group.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import type { HttpMethod } from "@effect/platform/HttpMethod"
import { Quarantine, TimerFailures, Timers } from "@orchestration/engine"
import { Schema } from "effect"
import { Wire } from "../ApiErrors.js"
import {
  ApprovalList,
  ThreadOrder,
  ThreadPage,
  ThreadStatus,
  ThreadView,
  TranscriptView,
  TriggerList
} from "../ThreadViews.js"
import { DecimalInteger, OneOf, Sequence, ThreadId } from "./QueryParams.js"

/** What a dispatch may answer besides success; each member carries its own status. */
const DispatchErrors = Schema.Union(
  Wire.InvalidCommand,
  Wire.CommandIdConflict,
  Wire.CommandRejected,
  Wire.EffectActionRefused,
  Wire.PayloadTooLarge,
  Wire.UnsupportedMediaType,
  Wire.StorageUnavailable,
  Wire.StorageCorrupt,
  Wire.EngineUnavailable,
  Wire.AggregateUnavailable,
  Wire.CommandDefect
)

/** An optional query parameter: absent, or present and valid (never `undefined` spelled out). */
const optionalParam = <A, I>(schema: Schema.Schema<A, I>) => Schema.optionalWith(schema, { exact: true })

export const EventView = Schema.Struct({
  sequence: Schema.Number,
  eventId: Schema.String,
  aggregateType: Schema.String,
  aggregateId: Schema.String,
  version: Schema.Number,
  type: Schema.String,
  payload: Schema.Unknown,
  commandId: Schema.String,
  occurredAt: Schema.Number
})

export const DispatchAnswer = Schema.Struct({
  commandId: Schema.String,
  status: Schema.Literal("accepted"),
  aggregateType: Schema.String,
  aggregateId: Schema.String,
  sequence: Schema.Number,
  events: Schema.Array(EventView),
  effectIds: Schema.Array(Schema.String),
  duplicate: Schema.Boolean
})

/** `{ commandId, type, ...fields of that command }`, checked by the engine against the type's schema. */
export const CommandBody = Schema.Struct(
  { commandId: Schema.String, type: Schema.String },
  Schema.Record({ key: Schema.String, value: Schema.Unknown })
)

export const ReceiptView = Schema.Struct({
  commandId: Schema.String,
  status: Schema.Literal("accepted", "rejected"),
  aggregateType: Schema.String,
  aggregateId: Schema.String,
  commandType: Schema.String,
  /** The last event's sequence (the log head it saw when it decided no events). */
  sequence: Schema.Number,
  effectIds: Schema.Array(Schema.String),
  rejection: Schema.optional(Schema.Struct({ reason: Schema.String, message: Schema.String })),
  acceptedAt: Schema.Number
})

export const EffectStatus = Schema.Literal("pending", "running", "succeeded", "failed", "cancelled", "quarantined")

/**
 * Why a row was parked: its settlement could not be recorded. The engine's stored record as it is
 * (QuarantineRecord.ts), so the document names the same closed reasons and settlers the engine writes.
 */
export const QuarantineView = Quarantine.QuarantineRecord

export const EffectView = Schema.Struct({
  sequence: Schema.Number,
  effectId: Schema.String,
  commandId: Schema.String,
  aggregateType: Schema.String,
  aggregateId: Schema.String,
  kind: Schema.String,
  payload: Schema.Unknown,
  /** Present when the stored payload could not be read (then `payload` is null): why. */
  undecodable: Schema.optional(Schema.String),
  lane: Schema.String,
  status: EffectStatus,
  attempts: Schema.Number,
  availableAt: Schema.Number,
  leaseOwner: Schema.NullOr(Schema.String),
  leaseExpiresAt: Schema.NullOr(Schema.Number),
  response: Schema.Unknown,
  error: Schema.Unknown,
  createdAt: Schema.Number,
  updatedAt: Schema.Number,
  /** Why the row was last quarantined (kept after a release or an operator's fail), or null. */
  quarantine: Schema.NullOr(QuarantineView),
  /** Present when the stored quarantine record could not be read (then `quarantine` is null): why. */
  quarantineUnreadable: Schema.optional(Schema.String)
})

export const TimerStatus = Schema.Literal("pending", "fired", "cancelled", "failed")

/** Why a timer could not fire, as its aggregate was told (engine TimerFailures.ts, whose reasons these are). */
export const TimerFailureView = Schema.Struct({
  reason: TimerFailures.TimerFailureReason,
  /** At most TimerFailures.MESSAGE_MAX characters, cut with a mark. */
  message: Schema.String
})

/** A durable timer's row (engine Timers.ts). */
export const TimerView = Schema.Struct({
  aggregateType: Schema.String,
  aggregateId: Schema.String,
  timerId: Schema.String,
  /** Bumped by each schedule of the same timer; the fired command's id ends in `#<generation>`. */
  generation: Schema.Number,
  dueAt: Schema.Number,
  /** The command it fires; null when the stored command could not be read. */
  command: Schema.Unknown,
  /** Present when the stored command is not JSON (then `command` is null): why. */
  undecodable: Schema.optional(Schema.String),
  status: TimerStatus,
  /** Fires of this generation that failed in the aggregate's own code. */
  attempts: Schema.Number,
  updatedAt: Schema.Number,
  /** Why this generation could not fire, when it is failed; else null. */
  failure: Schema.NullOr(TimerFailureView)
})

export const HealthReport = Schema.Struct({
  status: Schema.Literal("ok", "degraded", "unavailable"),
  storage: Schema.Struct({ freeBytes: Schema.Number, floorBytes: Schema.Number, writable: Schema.Boolean }),
  engine: Schema.Struct({ active: Schema.Boolean, head: Schema.Number, queueDepth: Schema.Number }),
  reactors: Schema.Array(Schema.Struct({ name: Schema.String, lag: Schema.Number, oldestPendingAgeMs: Schema.Number })),
  /** `quarantined`: rows parked for an operator (release or fail them); any makes the status degraded. */
  outbox: Schema.Struct({
    pending: Schema.Number,
    running: Schema.Number,
    failed: Schema.Number,
    quarantined: Schema.Number
  }),
  /** Which store, whether it answers, and (PostgreSQL) whether it takes writes and who else is live. */
  database: Schema.Struct({
    backend: Schema.Literal("sqlite", "postgres"),
    nodeId: Schema.String,
    connected: Schema.Boolean,
    latencyMs: Schema.Number,
    /** PostgreSQL: false on a read-only or recovering (standby) server. */
    acceptsWrites: Schema.Boolean,
    /** Live worker processes on this store (their owner ids), this one included. */
    liveOwners: Schema.Array(Schema.String),
    /**
     * PostgreSQL: how long (ms) the oldest open writer of the store has been open (0: none). Over 30 s
     * the status is degraded: it holds back the commit horizon that reactors and log readers wait on.
     */
    oldestWriterMs: Schema.Number
  }),
  /** The domain's own components (e.g. `mcp:<server>`); a degraded one makes the status degraded. */
  components: Schema.Array(
    Schema.Struct({ name: Schema.String, status: Schema.Literal("ok", "degraded"), message: Schema.String })
  )
})
export type HealthReport = typeof HealthReport.Type

/** Operator actions take an optional `{ commandId }` (default `operator:<action>:<effectId>#<attempts>.<operatorActions>`, see EffectOutcomes.operatorId). */
export const OperatorBody = Schema.Struct({ commandId: Schema.optional(Schema.String) })

/** Failing a quarantined effect takes the operator's reason, stored on the row. */
export const FailQuarantinedBody = Schema.Struct({
  reason: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(500))
})

const commandId = HttpApiSchema.param("commandId", Schema.String)
const threadId = HttpApiSchema.param("threadId", ThreadId)
const effectId = HttpApiSchema.param("effectId", Schema.String)

/** `GET /v1/events`: the log after a sequence, optionally one aggregate's. */
const EventsQuery = Schema.Struct({
  after: optionalParam(Sequence),
  limit: optionalParam(DecimalInteger(1, 1000)),
  aggregateId: optionalParam(Schema.String)
})

/** `GET /v1/threads`: a page of threads, by status, newest or oldest first. */
const ThreadsQuery = Schema.Struct({
  limit: optionalParam(DecimalInteger(1, 500)),
  /** The `next` of the previous page. */
  after: optionalParam(Sequence),
  status: optionalParam(OneOf(...ThreadStatus.literals)),
  order: optionalParam(OneOf(...ThreadOrder.literals))
})

/** `GET /v1/effects`: outbox rows by status, kind and aggregate. */
const EffectsQuery = Schema.Struct({
  status: optionalParam(OneOf(...EffectStatus.literals)),
  kind: optionalParam(Schema.String),
  aggregateId: optionalParam(Schema.String),
  limit: optionalParam(DecimalInteger(1, 1000))
})

/** `GET /v1/timers`: timers in one status, failed unless named. */
const TimersQuery = Schema.Struct({
  status: optionalParam(OneOf(...TimerStatus.literals)),
  limit: optionalParam(DecimalInteger(1, Timers.LIST_MAX))
})

/** A Server-Sent Events response, as its OpenAPI document describes it. */
const EventStream = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/event-stream" }))

/** A read of something named: 404 when there is no such thing, 503 when the store cannot be read now, 500 when what it holds is damaged. */
const readOf = <N extends string, M extends HttpMethod, P, U, B, H, S, E, R, RE>(
  endpoint: HttpApiEndpoint.HttpApiEndpoint<N, M, P, U, B, H, S, E, R, RE>
) => endpoint.addError(Wire.NotFound).addError(Wire.StorageUnavailable).addError(Wire.StorageCorrupt)

/** The endpoint's description in the OpenAPI document. */
const described =
  (text: string) =>
  <N extends string, M extends HttpMethod, P, U, B, H, S, E, R, RE>(
    endpoint: HttpApiEndpoint.HttpApiEndpoint<N, M, P, U, B, H, S, E, R, RE>
  ) =>
    endpoint.annotate(OpenApi.Description, text)

export class CommandsGroup extends HttpApiGroup.make("commands")
  .add(
    HttpApiEndpoint.post("dispatch", "/commands")
      .setPayload(CommandBody)
      .addSuccess(DispatchAnswer)
      .addError(DispatchErrors)
      .pipe(described("Dispatch a command; the answer means its intent committed. Retry with the same commandId."))
  )
  .add(HttpApiEndpoint.get("receipt")`/commands/${commandId}`.addSuccess(ReceiptView).pipe(readOf))
  .prefix("/v1") {}

export class EventsGroup extends HttpApiGroup.make("events")
  .add(
    HttpApiEndpoint.get("list", "/events")
      .setUrlParams(EventsQuery)
      .addSuccess(Schema.Struct({ events: Schema.Array(EventView), next: Schema.Number }))
      .addError(Wire.StorageUnavailable)
      .addError(Wire.StorageCorrupt)
  )
  .add(
    HttpApiEndpoint.get("stream", "/events/stream")
      .setUrlParams(Schema.Struct({ after: optionalParam(Sequence), access_token: optionalParam(Schema.String) }))
      .addSuccess(EventStream)
      .addError(Wire.StorageUnavailable)
      .addError(Wire.StorageCorrupt)
      .pipe(described("Server-Sent Events: id = sequence, event = type, data = the event. Honours Last-Event-ID."))
  )
  .prefix("/v1") {}

export class ThreadsGroup extends HttpApiGroup.make("threads")
  .add(
    HttpApiEndpoint.get("list", "/threads")
      .setUrlParams(ThreadsQuery)
      .addSuccess(ThreadPage)
      .pipe(
        readOf,
        described(
          "A page of threads, most recently changed first, or least with order=oldest (default 50, at most 500). Page on with after=<next>."
        )
      )
  )
  .add(HttpApiEndpoint.get("thread")`/threads/${threadId}`.addSuccess(ThreadView).pipe(readOf))
  .add(HttpApiEndpoint.get("transcript")`/threads/${threadId}/transcript`.addSuccess(TranscriptView).pipe(readOf))
  .add(
    HttpApiEndpoint.get("stream")`/threads/${threadId}/stream`
      .setUrlParams(
        Schema.Struct({
          /** A position (an id of this stream) to start after; Last-Event-ID wins over it. */
          after: optionalParam(Schema.String),
          access_token: optionalParam(Schema.String)
        })
      )
      .addSuccess(EventStream)
      .pipe(
        readOf,
        described(
          "Server-Sent Events: the thread's events (event: thread-event) and the running model step's text as it grows " +
            "(event: delta; superseded / interrupted / failed mark partial text that is not the answer). " +
            "id = a position (<seq> or <seq>:<step>:<attempt>:<end>:<turnId>); resume with Last-Event-ID."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("triggers", "/triggers")
      .setUrlParams(Schema.Struct({ limit: optionalParam(DecimalInteger(1, 1000)) }))
      .addSuccess(TriggerList)
      .pipe(
        readOf,
        described(
          "The cron triggers that are not deleted, soonest next fire first (default 100, at most 1000), each with its next fire time."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("approvals", "/approvals")
      .setUrlParams(Schema.Struct({ limit: optionalParam(DecimalInteger(1, 500)), threadId: optionalParam(ThreadId) }))
      .addSuccess(ApprovalList)
      .pipe(
        readOf,
        described(
          "Tool calls awaiting an operator's approval (APPROVAL=required), earliest deadline first (default 100, at most 500). " +
            "Answer each with the command tool.approve { threadId, callId, note? } or tool.deny { threadId, callId, reason? }."
        )
      )
  )
  .prefix("/v1") {}

export class EffectsGroup extends HttpApiGroup.make("effects")
  .add(
    HttpApiEndpoint.get("list", "/effects")
      .setUrlParams(EffectsQuery)
      .addSuccess(Schema.Struct({ effects: Schema.Array(EffectView) }))
      .addError(Wire.StorageUnavailable)
      .addError(Wire.StorageCorrupt)
  )
  .add(HttpApiEndpoint.get("get")`/effects/${effectId}`.addSuccess(EffectView).pipe(readOf))
  .add(
    HttpApiEndpoint.post("retry")`/effects/${effectId}/retry`
      .setPayload(OperatorBody)
      .addSuccess(DispatchAnswer)
      .addError(Wire.NotFound)
      .addError(DispatchErrors)
  )
  .add(
    HttpApiEndpoint.post("cancel")`/effects/${effectId}/cancel`
      .setPayload(OperatorBody)
      .addSuccess(DispatchAnswer)
      .addError(Wire.NotFound)
      .addError(DispatchErrors)
  )
  .add(
    HttpApiEndpoint.post("release")`/effects/${effectId}/release`
      .addSuccess(DispatchAnswer)
      .addError(Wire.NotFound)
      .addError(Wire.EffectNotQuarantined)
      .addError(Wire.EffectStillQuarantined)
      .addError(DispatchErrors)
      .pipe(
        described(
          "Record a quarantined effect's parked settlement now that its cause is fixed; 409 EffectStillQuarantined when it is not."
        )
      )
  )
  .add(
    HttpApiEndpoint.post("fail")`/effects/${effectId}/fail`
      .setPayload(FailQuarantinedBody)
      .addSuccess(EffectView)
      .addError(Wire.NotFound)
      .addError(Wire.EffectNotQuarantined)
      .addError(Wire.PayloadTooLarge)
      .addError(Wire.UnsupportedMediaType)
      .addError(Wire.StorageUnavailable)
      .addError(Wire.StorageCorrupt)
      .pipe(described("End a quarantined effect as failed with the operator's reason; its aggregate is not told."))
  )
  .prefix("/v1") {}

/** `GET /v1/outbox/summary`: what the dashboard samples every few seconds. */
export const OutboxSummary = Schema.Struct({
  /** Server time of the reading (epoch ms), so clients chart against it. */
  at: Schema.Number,
  /** The last committed event sequence: its change over time is the log's throughput. */
  head: Schema.Number,
  rows: Schema.Array(Schema.Struct({ status: Schema.String, kind: Schema.String, count: Schema.Number })),
  /** Rows settled so far (succeeded, failed, cancelled, still kept): its change is settlement throughput. */
  settled: Schema.Number,
  /** How long the oldest due pending row has waited (0 when none waits). */
  oldestPendingAgeMs: Schema.Number,
  reactors: Schema.Array(Schema.Struct({ name: Schema.String, lag: Schema.Number, oldestPendingAgeMs: Schema.Number })),
  /** The newest failed rows (at most 20), with their error and attempts. */
  recentFailures: Schema.Array(EffectView),
  /** The oldest quarantined rows (at most 20): each waits for an operator to release or fail it. */
  quarantined: Schema.Array(EffectView)
})
export type OutboxSummary = typeof OutboxSummary.Type

const outboxSummary = HttpApiEndpoint.get("summary", "/outbox/summary")
  .addSuccess(OutboxSummary)
  .addError(Wire.StorageUnavailable)
  .addError(Wire.StorageCorrupt)
  .pipe(described("Outbox rows by status and kind, oldest due pending age, reactor lag, the newest failures."))

export class OutboxGroup extends HttpApiGroup.make("outbox").add(outboxSummary).prefix("/v1") {}

export class TimersGroup extends HttpApiGroup.make("timers")
  .add(
    HttpApiEndpoint.get("list", "/timers")
      .setUrlParams(TimersQuery)
      .addSuccess(Schema.Struct({ timers: Schema.Array(TimerView) }))
      .addError(Wire.StorageUnavailable)
      .addError(Wire.StorageCorrupt)
      .pipe(
        described(
          `Durable timers in one status (default failed: those that can never fire, each with its failure's reason and message), ` +
            `most recently changed first (default 100, at most ${Timers.LIST_MAX}).`
        )
      )
  )
  .prefix("/v1") {}

export class OpsGroup extends HttpApiGroup.make("ops")
  .add(
    HttpApiEndpoint.get("health", "/health")
      .addSuccess(HealthReport)
      .pipe(described("200 when ok or degraded, 503 (same body) when unavailable."))
  )
  .add(
    HttpApiEndpoint.get("metrics", "/metrics").addSuccess(
      Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/plain; version=0.0.4" }))
    )
  ) {}

export class ServerApi extends HttpApi.make("orchestration")
  .add(CommandsGroup)
  .add(EventsGroup)
  .add(ThreadsGroup)
  .add(EffectsGroup)
  .add(OutboxGroup)
  .add(TimersGroup)
  .add(OpsGroup)
  .addError(Wire.InvalidRequest)
  .addError(Wire.Unauthorized)
  .addError(Wire.Forbidden)
  .addError(Wire.NotFound)
  .addError(Wire.UnsupportedMediaType)
  // Every route may answer what the listener's gate answers while the server starts or stops (ListenerGate).
  .addError(Wire.Starting)
  .addError(Wire.EngineUnavailable)
  // A defect of the server's own on any route (Edge.ts): a typed 500, never an empty one.
  .addError(Wire.InternalError)
  .annotate(OpenApi.Title, "Durable orchestration server") {}
