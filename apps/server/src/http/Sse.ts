/**
 * Server-Sent Events framing for the event log. The stream itself comes from the engine's
 * `followEvents` (catch up from the table, then follow, every event once, in order), so a client
 * that reconnects with `Last-Event-ID: <sequence>` continues exactly after what it saw.
 */
import type { EventRecord } from "@orchestration/engine"
import { type Duration, Schedule, Stream } from "effect"
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
 * The text of an event stream: an opening comment (so clients and proxies see the response start at
 * once), then events, with a comment line every `heartbeatEvery` so idle connections stay open.
 * Ends when the events end.
 */
export const eventStream = <E, R>(events: Stream.Stream<EventRecord, E, R>, heartbeatEvery: Duration.DurationInput) =>
  Stream.make(": connected\n\n").pipe(
    Stream.concat(
      Stream.merge(
        Stream.map(events, formatEvent),
        Stream.fromSchedule(Schedule.spaced(heartbeatEvery)).pipe(Stream.as(heartbeatLine)),
        { haltStrategy: "left" }
      )
    )
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
