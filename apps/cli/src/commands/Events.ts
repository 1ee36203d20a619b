/**
 * `orchestrator events tail [--after N]`: follows the event log over Server-Sent Events, one line
 * per event, until interrupted (Ctrl-C, exit 0). When the server ends the stream (a restart, a
 * storage failure) it reconnects with Last-Event-ID, so no event is skipped or printed twice.
 */
import { Command, Options } from "@effect/cli"
import { Console, Effect, Option, Schedule, Stream } from "effect"
import * as Connection from "../Connection.js"
import * as Render from "../Render.js"
import * as ServerClient from "../ServerClient.js"

export const renderEvent = (e: ServerClient.EventView): string =>
  `${e.sequence}  ${Render.time(e.occurredAt)}  ${e.type}  ${e.aggregateType}/${e.aggregateId} v${e.version}  ${e.commandId}`

const tail = Command.make(
  "tail",
  {
    ...Connection.connectionOptions,
    after: Options.integer("after").pipe(
      Options.withDescription(
        "Start after this sequence (0: the whole log). Default: the current head, so only new events."
      ),
      Options.optional
    )
  },
  (options) =>
    Effect.gen(function* () {
      const connection = yield* Connection.resolve(options)
      let last = Option.isSome(options.after)
        ? options.after.value
        : (yield* ServerClient.health(connection)).engine.head
      yield* Console.error(`following the event log after ${last} (Ctrl-C to stop)`)
      const print = (message: ServerClient.StreamMessage) => {
        if (message._tag === "StreamError")
          return Console.error(`the server ended the stream: ${message.error}: ${message.message}`)
        last = message.event.sequence
        return Console.log(connection.json ? JSON.stringify(message.event) : renderEvent(message.event))
      }
      const follow = Effect.suspend(() => ServerClient.eventStream(connection, last).pipe(Stream.runForEach(print)))
      // The first connection must work (exit 3 or 4 otherwise); after that, keep following.
      yield* follow
      // A restarting server refuses connections or answers 503 for a while: wait for it, backing off
      // to one try every 5 s. Anything else (a revoked token) ends the command with its exit code.
      const reconnect = follow.pipe(
        Effect.retry({
          schedule: Schedule.exponential("200 millis").pipe(Schedule.union(Schedule.spaced("5 seconds"))),
          while: (error) => error._tag === "ServerUnreachable" || error._tag === "ServerFailed"
        })
      )
      return yield* Effect.forever(
        Effect.suspend(() => Console.error(`the event stream ended after ${last}; reconnecting`)).pipe(
          Effect.zipRight(reconnect)
        )
      )
    })
).pipe(
  Command.withDescription(
    "Follow the event log (GET /v1/events/stream), one line per event (--json: one JSON object per line), until interrupted."
  )
)

export const events = Command.make("events").pipe(
  Command.withDescription("The event log."),
  Command.withSubcommands([tail])
)
