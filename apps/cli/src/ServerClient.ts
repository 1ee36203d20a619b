/**
 * Talking to a running server: the typed HttpApiClient of the server's own HttpApi (so requests and
 * answers are checked against the same schemas the server serves), the health report (which answers
 * 503 with the same body when unavailable), and the event stream. Every HTTP failure becomes a
 * CliError in `fromHttpFailure` (or, for an error answer the typed client cannot decode, from the
 * answer itself); both end in `fromStatus`, the one mapping from a status to what the CLI says.
 */
import { FetchHttpClient, type HttpApi, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Api, ApiErrors as ServerErrors, ListenerGate, ThreadStream } from "@orchestration/server"
import { Effect, Option, type ParseResult, Schema, Stream } from "effect"
import {
  Conflict,
  isCliError,
  NotFound,
  Refused,
  ServerFailed,
  ServerUnreachable,
  Unauthorized,
  UsageError,
  type CliError
} from "./CliErrors.js"
import type { Connection } from "./Connection.js"

type ServerApi = typeof Api.ServerApi
export type ApiGroups = ServerApi extends HttpApi.HttpApi<any, infer G, any, any> ? G : never
export type ApiErrors = ServerApi extends HttpApi.HttpApi<any, any, infer E, any> ? E : never
/** The typed client of the server's HttpApi. */
export type ApiClient = HttpApiClient.Client<ApiGroups, ApiErrors, never>

/**
 * Every request carries the token, when there is one. A state-changing request without a body (an
 * operator's release) still says it is JSON: the server refuses any state-changing request that does
 * not, so that a cross-site form or no-cors fetch can never drive it.
 */
const authorize = (connection: Connection) => (client: HttpClient.HttpClient) => {
  const json = HttpClient.mapRequest(client, (request) =>
    request.method !== "GET" && request.body._tag === "Empty"
      ? HttpClientRequest.setHeader(request, "content-type", "application/json")
      : request
  )
  return connection.token === undefined
    ? json
    : HttpClient.mapRequest(json, HttpClientRequest.bearerToken(connection.token))
}

/** A failing answer's status and JSON body, kept for when the typed client cannot decode it. */
interface FailedAnswer {
  readonly status: number
  readonly body: unknown
}

const makeClient = (
  connection: Connection,
  keep: (answer: FailedAnswer | undefined) => void
): Effect.Effect<ApiClient, never, HttpClient.HttpClient> =>
  HttpApiClient.make(Api.ServerApi, {
    baseUrl: connection.url,
    transformClient: (client) =>
      HttpClient.transformResponse(
        authorize(connection)(client),
        // The body is read once and cached by the response: the typed client decodes the same text.
        // Each answer replaces the last, so a failure is never explained by an earlier request's answer.
        Effect.tap((response) =>
          response.status < 400
            ? Effect.sync(() => keep(undefined))
            : Effect.map(Effect.option(response.json), (body) =>
                keep({ status: response.status, body: Option.getOrUndefined(body) })
              )
        )
      )
  })

/**
 * An error answer the typed client could not decode (a newer server's error, or one the route does
 * not declare), told by its status and, when the body is the API's error shape, its tag and message;
 * instead of a schema's decode failure or a bare status code.
 */
const undecodedAnswer = (connection: Connection, answer: FailedAnswer): CliError => {
  const named = answer.body as { readonly error?: unknown; readonly message?: unknown } | undefined
  const error = typeof named?.error === "string" ? named.error.slice(0, 100) : `HTTP ${answer.status}`
  const message = typeof named?.message === "string" ? named.message.slice(0, 500) : "(no message)"
  return fromStatus(connection, answer.status, error, message)
}

const transportCode = (cause: unknown): string | undefined => {
  // fetch wraps the socket error: TypeError("fetch failed") with `cause.code` (ECONNREFUSED, …).
  let current: unknown = cause
  for (let depth = 0; depth < 4 && typeof current === "object" && current !== null; depth++) {
    const code = (current as { code?: unknown }).code
    if (typeof code === "string") return code
    current = (current as { cause?: unknown }).cause
  }
  return undefined
}

/** A server answer by its HTTP status and the `error` tag of its body. */
export const fromStatus = (connection: Connection, status: number, error: string, message: string): CliError => {
  if (status === 401) {
    return new Unauthorized({
      url: connection.url,
      tokenSent: connection.token !== undefined,
      message:
        connection.token === undefined
          ? `the server at ${connection.url} requires a token (401): pass --token or set API_TOKEN`
          : `the server at ${connection.url} refused the token (401): check --token / API_TOKEN`
    })
  }
  if (status === 404) return new NotFound({ message })
  if (status === 409) return new Conflict({ error, message: `${error}: ${message}` })
  if (status === 400 || status === 403 || status === 413 || status === 415 || status === 422) {
    return new Refused({ status, error, message: `${error} (${status}): ${message}` })
  }
  return new ServerFailed({ status, error, message: `the server answered ${status} ${error}: ${message}` })
}

/** The one mapping of an HTTP failure (transport, status, decoded error body, bad answer) to a CliError. */
export const fromHttpFailure =
  (connection: Connection) =>
  (failure: unknown): CliError => {
    const tagged = failure as { readonly _tag?: unknown; readonly message?: unknown }
    const tag = typeof tagged._tag === "string" ? tagged._tag : ""
    const message = typeof tagged.message === "string" ? tagged.message : String(failure)
    if (tag === "RequestError") {
      const { reason, cause } = failure as { reason: string; cause: unknown }
      if (reason === "InvalidUrl") return new UsageError({ message: `--url '${connection.url}' is not a valid URL` })
      const code = transportCode(cause)
      return new ServerUnreachable({
        url: connection.url,
        ...(code === undefined ? {} : { code }),
        message: `cannot reach the server at ${connection.url}: is it running?${code === undefined ? "" : ` (${code})`}`
      })
    }
    if (tag === "ResponseError") {
      const { response, reason } = failure as { response: { status: number }; reason: string }
      return fromStatus(
        connection,
        response.status,
        reason === "StatusCode" ? `HTTP ${response.status}` : reason,
        message
      )
    }
    if (tag === "ParseError") {
      return new ServerFailed({
        status: 0,
        error: "UnexpectedAnswer",
        message: `the server's answer is not what this CLI expects: ${message}`
      })
    }
    const status = ServerErrors.statusOfTag[tag]
    if (status !== undefined) return fromStatus(connection, status, tag, message)
    return new ServerFailed({ status: 0, error: tag || "Unknown", message })
  }

/** Runs `f` with the typed client; every failure comes out as a CliError. */
export const call = <A, E>(
  connection: Connection,
  f: (api: ApiClient) => Effect.Effect<A, E>
): Effect.Effect<A, CliError> =>
  Effect.suspend(() => {
    let failed: FailedAnswer | undefined
    return Effect.flatMap(
      makeClient(connection, (answer) => {
        failed = answer
      }),
      f
    ).pipe(
      Effect.mapError((failure) => {
        // The typed client could not decode an error answer (ParseError), or the route declares none for
        // its status (ResponseError): the answer itself says what happened.
        const tag = (failure as { readonly _tag?: unknown })._tag
        const undecoded = tag === "ParseError" || tag === "ResponseError"
        return failed !== undefined && undecoded
          ? undecodedAnswer(connection, failed)
          : fromHttpFailure(connection)(failure)
      }),
      Effect.provide(FetchHttpClient.layer)
    )
  })

/** Path segments are sent as given by the typed client: ids with `:` or `#` must be encoded. */
export const segment = (id: string) => encodeURIComponent(id)

const httpClient = (connection: Connection) => Effect.map(HttpClient.HttpClient, authorize(connection))

/** GET /health: 200 (ok, degraded) and 503 (unavailable) both carry the report. */
export const health = (connection: Connection): Effect.Effect<Api.HealthReport, CliError> =>
  Effect.gen(function* () {
    const client = yield* httpClient(connection)
    const response = yield* client.get(`${connection.url}/health`)
    const body = yield* response.json
    if (response.status === 200 || response.status === 503) {
      const report = Schema.decodeUnknownOption(Api.HealthReport)(body)
      if (Option.isSome(report)) return report.value
      // The listener is open but the server is not serving (ListenerGate): no report to show.
      const gate = Schema.decodeUnknownOption(ListenerGate.GateHealth)(body)
      if (Option.isSome(gate)) {
        const phase = gate.value.status
        return yield* new ServerFailed({
          status: response.status,
          error: phase === "starting" ? "Starting" : "Stopping",
          message: `the server at ${connection.url} is ${phase === "starting" ? "starting; retry shortly" : "stopping"}`
        })
      }
    }
    // Any other answer is told as any undecodable error answer is: its status, tag and message, clipped.
    return yield* undecodedAnswer(connection, { status: response.status, body })
  }).pipe(
    Effect.mapError((failure) => (isCliError(failure) ? failure : fromHttpFailure(connection)(failure))),
    Effect.provide(FetchHttpClient.layer)
  )

export type EventView = typeof Api.EventView.Type

/** One message of the event stream: an event, or the server telling why it ended the stream. */
export type StreamMessage =
  | { readonly _tag: "Event"; readonly event: EventView }
  | { readonly _tag: "StreamError"; readonly error: string; readonly message: string }

const decodeEvent = Schema.decodeUnknown(Schema.parseJson(Api.EventView))

/** One Server-Sent Events message as sent: its id (if any), event name and data. */
export interface SseFrame {
  readonly id: string | undefined
  readonly event: string
  readonly data: string
}

/**
 * Parses Server-Sent Events text into frames: fields until a blank line; comment lines (`:`) are
 * heartbeats. Pure over lines, so it is tested without a server.
 */
export const sseFrames = <E, R>(lines: Stream.Stream<string, E, R>): Stream.Stream<SseFrame, E, R> =>
  lines.pipe(
    Stream.mapAccum(
      { id: undefined as string | undefined, event: "message", data: [] as Array<string> },
      (frame, line) => {
        if (line === "") {
          const done = frame.data.length > 0 ? [{ id: frame.id, event: frame.event, data: frame.data.join("\n") }] : []
          return [{ id: undefined, event: "message", data: [] }, done]
        }
        if (line.startsWith(":")) return [frame, []]
        const colon = line.indexOf(":")
        const field = colon === -1 ? line : line.slice(0, colon)
        const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "")
        if (field === "id") return [{ ...frame, id: value }, []]
        if (field === "event") return [{ ...frame, event: value }, []]
        if (field === "data") return [{ ...frame, data: [...frame.data, value] }, []]
        return [frame, []]
      }
    ),
    Stream.flattenIterables
  )

const streamError = (frame: SseFrame) => {
  const body = JSON.parse(frame.data) as { error?: string; message?: string }
  return { _tag: "StreamError", error: body.error ?? "error", message: body.message ?? frame.data } as const
}

/** The event stream's messages: events, and the server's reason when it ends the stream. */
export const sseMessages = <E, R>(
  lines: Stream.Stream<string, E, R>
): Stream.Stream<StreamMessage, E | ParseResult.ParseError, R> =>
  sseFrames(lines).pipe(
    Stream.mapEffect(
      (frame): Effect.Effect<StreamMessage, ParseResult.ParseError> =>
        frame.event === "error"
          ? Effect.succeed(streamError(frame))
          : Effect.map(decodeEvent(frame.data), (event) => ({ _tag: "Event", event }))
    )
  )

/** One message of a thread's stream (GET /v1/threads/:id/stream), with its id (the position after it). */
export type ThreadMessage =
  | { readonly _tag: "Event"; readonly id: string; readonly event: EventView }
  | { readonly _tag: "Delta"; readonly id: string; readonly delta: ThreadStream.DeltaView }
  | { readonly _tag: "ToolDelta"; readonly id: string; readonly delta: ThreadStream.ToolDeltaView }
  | {
      readonly _tag: "Partial"
      readonly id: string
      readonly kind: "superseded" | "interrupted" | "failed"
      readonly partial: ThreadStream.PartialView
    }
  | { readonly _tag: "StreamError"; readonly error: string; readonly message: string }

const decodeDelta = Schema.decodeUnknown(Schema.parseJson(ThreadStream.DeltaView))
const decodeToolDelta = Schema.decodeUnknown(Schema.parseJson(ThreadStream.ToolDeltaView))
const decodePartial = Schema.decodeUnknown(Schema.parseJson(ThreadStream.PartialView))

/** Pure over lines: the thread stream's messages; unknown event names are skipped (newer servers). */
export const threadMessages = <E, R>(
  lines: Stream.Stream<string, E, R>
): Stream.Stream<ThreadMessage, E | ParseResult.ParseError, R> =>
  sseFrames(lines).pipe(
    Stream.mapEffect((frame): Effect.Effect<ReadonlyArray<ThreadMessage>, ParseResult.ParseError> => {
      const id = frame.id ?? ""
      switch (frame.event) {
        case "error":
          return Effect.succeed([streamError(frame)])
        case "thread-event":
          return Effect.map(decodeEvent(frame.data), (event) => [{ _tag: "Event", id, event }])
        case "delta":
          return Effect.map(decodeDelta(frame.data), (delta) => [{ _tag: "Delta", id, delta }])
        case "tool-delta":
          return Effect.map(decodeToolDelta(frame.data), (delta) => [{ _tag: "ToolDelta", id, delta }])
        case "superseded":
        case "interrupted":
        case "failed": {
          const kind = frame.event
          return Effect.map(decodePartial(frame.data), (partial) => [{ _tag: "Partial", id, kind, partial }])
        }
        default:
          return Effect.succeed([])
      }
    }),
    Stream.flattenIterables
  )

/** GET `path` as Server-Sent Events, resuming at `lastEventId`; a non-200 answer is its CliError. */
const sseLines = (connection: Connection, path: string, lastEventId: string | undefined) =>
  Effect.gen(function* () {
    const client = yield* httpClient(connection)
    const request = HttpClientRequest.get(`${connection.url}${path}`).pipe(
      HttpClientRequest.setHeader("accept", "text/event-stream")
    )
    const response = yield* client.execute(
      lastEventId === undefined ? request : HttpClientRequest.setHeader(request, "last-event-id", lastEventId)
    )
    if (response.status !== 200) {
      // swallow-ok: an error body that is not JSON still gives its status, which is what is reported.
      const body = (yield* Effect.orElseSucceed(response.json, () => ({}))) as { error?: unknown; message?: unknown }
      return yield* fromStatus(
        connection,
        response.status,
        String(body.error ?? `HTTP ${response.status}`),
        String(body.message ?? "")
      )
    }
    return response.stream.pipe(Stream.decodeText(), Stream.splitLines)
  })

/**
 * One connection to a thread's stream, after position `after` (an id it sent; undefined: from the
 * thread's start). Ends when the server ends the response.
 */
export const threadStream = (
  connection: Connection,
  threadId: string,
  after: string | undefined
): Stream.Stream<ThreadMessage, CliError> =>
  Stream.unwrapScoped(
    Effect.map(sseLines(connection, `/v1/threads/${segment(threadId)}/stream`, after), threadMessages)
  ).pipe(
    Stream.mapError((failure) => (isCliError(failure) ? failure : fromHttpFailure(connection)(failure))),
    Stream.provideLayer(FetchHttpClient.layer)
  )

/**
 * One connection to GET /v1/events/stream, continuing after `after` (sent as Last-Event-ID, which
 * the server prefers over ?after=). Ends when the server ends the response.
 */
export const eventStream = (connection: Connection, after: number): Stream.Stream<StreamMessage, CliError> =>
  Stream.unwrapScoped(Effect.map(sseLines(connection, "/v1/events/stream", String(after)), sseMessages)).pipe(
    Stream.mapError((failure) => (isCliError(failure) ? failure : fromHttpFailure(connection)(failure))),
    Stream.provideLayer(FetchHttpClient.layer)
  )
