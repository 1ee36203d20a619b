/** GET /v1/events (a page of the log) and GET /v1/events/stream (Server-Sent Events). */
import { HttpApiBuilder } from "@effect/platform"
import { Engine } from "@orchestration/engine"
import { Effect } from "effect"
import { InvalidRequest, fromStorageFailure } from "../ApiErrors.js"
import { ServerState } from "../ServerState.js"
import { ServerApi } from "./Api.js"
import { eventJson, eventStream, parseLastEventId, sseResponse } from "./Sse.js"

/** Idle connections get a comment line this often, so proxies and clients see the stream is alive. */
export const heartbeatEvery = "15 seconds"

export const EventsLive = HttpApiBuilder.group(ServerApi, "events", (handlers) =>
  Effect.gen(function* () {
    const engine = yield* Engine.Engine
    const state = yield* ServerState
    return handlers
      .handle("list", ({ urlParams }) =>
        engine
          .readEvents({
            after: urlParams.after ?? 0,
            limit: urlParams.limit ?? 100,
            ...(urlParams.aggregateId === undefined ? {} : { aggregateId: urlParams.aggregateId })
          })
          .pipe(
            Effect.mapError(fromStorageFailure),
            Effect.map((events) => ({
              events: events.map(eventJson),
              next: events.at(-1)?.sequence ?? urlParams.after ?? 0
            }))
          )
      )
      .handleRaw("stream", ({ request, urlParams }) =>
        Effect.gen(function* () {
          // A reconnecting EventSource sends Last-Event-ID; it wins over ?after= from the first URL.
          const last = parseLastEventId(request.headers["last-event-id"])
          if (typeof last === "object") {
            return yield* new InvalidRequest({
              message: last.problem,
              issues: [{ path: ["Last-Event-ID"], message: last.problem }]
            })
          }
          const after = last ?? urlParams.after ?? 0
          return sseResponse(eventStream(engine.followEvents({ after }), heartbeatEvery), {
            what: "event stream",
            draining: state.draining
          })
        })
      )
  })
)
