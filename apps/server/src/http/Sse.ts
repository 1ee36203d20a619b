/**
 * Server-Sent Events framing for the event log. The stream itself comes from the engine's
 * `followEvents` (catch up from the table, then follow, every event once, in order), so a client
 * that reconnects with `Last-Event-ID: <sequence>` continues exactly after what it saw.
 */
import { type EventRecord, StorageFailure } from "@orchestration/engine"
import { HttpServerResponse } from "@effect/platform"
import { Cause, Deferred, type Duration, Effect, Schedule, Stream } from "effect"
import { fromStorageFailure } from "../ApiErrors.js"
import { clip } from "../ClientValue.js"
import { parseDecimal } from "./QueryParams.js"

/** The event as a client sees it in `data:` (the same shape as GET /v1/events). */
export const eventJson = (record: EventRecord) => ({
  sequence: record.sequence,
  eventId: record.eventId,
  aggregateType: record.aggregateType,
  aggregateId: record.aggregateId,
  version: record.version,
  type: record.type,
  payload: record.payload,
  commandId: record.commandId,
  occurredAt: record.occurredAt
})

/** One SSE message. JSON.stringify never emits a raw newline, so `data:` stays one line. */
export const formatEvent = (record: EventRecord) =>
  `id: ${record.sequence}\nevent: ${record.type.replace(/[\r\n]/g, " ")}\ndata: ${JSON.stringify(eventJson(record))}\n\n`

export const heartbeatLine = ": keep-alive\n\n"

/**
 * The text of a stream of SSE messages: an opening comment (so clients and proxies see the response
 * start at once), then the messages, with a comment line every `heartbeatEvery` so idle connections
 * stay open. Ends when the messages end.
 */
export const sseText = <E, R>(messages: Stream.Stream<string, E, R>, heartbeatEvery: Duration.DurationInput) =>
  Stream.make(": connected\n\n").pipe(
    Stream.concat(
      Stream.merge(messages, Stream.fromSchedule(Schedule.spaced(heartbeatEvery)).pipe(Stream.as(heartbeatLine)), {
        haltStrategy: "left"
      })
    )
  )

/** The text of an event stream: each event of the log as one SSE message (see `sseText`). */
export const eventStream = <E, R>(events: Stream.Stream<EventRecord, E, R>, heartbeatEvery: Duration.DurationInput) =>
  sseText(Stream.map(events, formatEvent), heartbeatEvery)

/**
 * An SSE response over a stream's text. A failing read ends the response loudly (logged as `what`
 * ended by a storage failure, and told to the client as an `error` event, StorageCorrupt when what
 * the store holds is damaged); the client reconnects with Last-Event-ID and loses nothing. Shutdown (`draining`) ends open streams, so the HTTP server
 * can close.
 */
export const sseResponse = <E extends { readonly message: string }>(
  text: Stream.Stream<string, E>,
  options: { readonly what: string; readonly draining: Deferred.Deferred<void> }
) =>
  HttpServerResponse.stream(
    text.pipe(
      Stream.catchAll((failure) =>
        Stream.fromEffect(Effect.logError(`${options.what} ended by a storage failure`, failure)).pipe(
          Stream.as(
            // Damage is told as such (StorageCorrupt): reconnecting reads the same bytes.
            `event: error\ndata: ${JSON.stringify({
              error: failure instanceof StorageFailure ? fromStorageFailure(failure)._tag : "StorageUnavailable",
              message: failure.message
            })}\n\n`
          )
        )
      ),
      // A defect (a bug in a read, a row no code expected) ends it as loudly: logged with its stack, and
      // an `error` event, so the client reconnects at its Last-Event-ID instead of seeing a cut connection.
      // (A client that went away interrupts the stream: no recovery handler runs for that.)
      Stream.catchAllCause((cause) =>
        Stream.fromEffect(
          Effect.logError(`${options.what} ended by a defect`, Cause.pretty(cause).slice(0, 2_000))
        ).pipe(
          Stream.as(
            `event: error\ndata: ${JSON.stringify({ error: "StreamFailed", message: `${options.what} ended unexpectedly; reconnect with Last-Event-ID` })}\n\n`
          )
        )
      ),
      Stream.interruptWhen(Deferred.await(options.draining)),
      Stream.encodeText
    ),
    { contentType: "text/event-stream", headers: { "cache-control": "no-cache", "x-accel-buffering": "no" } }
  )

/** Parses `Last-Event-ID`; undefined when absent, a string problem when malformed. */
export const parseLastEventId = (header: string | undefined): number | undefined | { readonly problem: string } => {
  if (header === undefined || header.trim() === "") return undefined
  const trimmed = header.trim()
  return (
    parseDecimal(trimmed) ?? {
      problem: `Last-Event-ID must be an event sequence (a whole number in decimal digits), got '${clip(trimmed)}'`
    }
  )
}
