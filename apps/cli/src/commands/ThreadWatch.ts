/**
 * `orchestrator threads watch <threadId> [--until-idle]`: follows a thread (GET /v1/threads/:id/stream)
 * in a terminal: the answer's text as it grows, each tool call's arguments as they stream (after a
 * `tool call <id>:` head), one line per event, and a note when partial text is
 * not the answer (a retry superseded it, the turn was interrupted or failed). When the server ends
 * the stream (a restart, a storage failure) it reconnects with Last-Event-ID, so nothing is printed
 * twice or skipped. `--until-idle` exits 0 once a turn ends and the thread has nothing running.
 */
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Schedule, Stream } from "effect"
import * as Connection from "../Connection.js"
import * as Render from "../Render.js"
import * as ServerClient from "../ServerClient.js"

/** What the terminal shows so far: whether the cursor is mid-line in streamed text (and whose), which steps streamed. */
export interface WatchScreen {
  readonly midText: boolean
  readonly streamed: ReadonlySet<string>
  /** The tool call whose arguments the cursor is in the middle of, if any. */
  readonly inToolCall?: string | undefined
}

export const emptyScreen: WatchScreen = { midText: false, streamed: new Set() }

const stepKey = (turnId: string, step: number) => `${turnId}#${step}`

const payloadOf = (event: ServerClient.EventView) => (event.payload ?? {}) as Record<string, unknown>

const eventLine = (event: ServerClient.EventView): string => {
  const p = payloadOf(event)
  const detail = (() => {
    switch (event.type) {
      case "turn.started":
        return `${p.turnId}: ${Render.compact(p.text, 100)}`
      case "model.responded":
        return `${p.turnId} step ${p.step}: ${(p.toolCalls as ReadonlyArray<unknown> | undefined)?.length ?? 0} tool call(s)`
      case "tool.result": {
        const result = (p.result ?? {}) as Record<string, unknown>
        return `${p.turnId} ${result.transcriptId}: ${result.outcome}`
      }
      case "turn.completed":
        return `${p.turnId} in ${p.steps} step(s)`
      case "turn.ended":
        return `${p.turnId} ${p.status}: ${p.reason}`
      default:
        return ""
    }
  })()
  return `[${event.sequence}] ${event.type}${detail === "" ? "" : `  ${detail}`}`
}

/** Pure: the text one message adds to the terminal, and the screen after it. */
export const renderMessage = (
  screen: WatchScreen,
  message: ServerClient.ThreadMessage
): { readonly text: string; readonly screen: WatchScreen } => {
  const newline = screen.midText ? "\n" : ""
  switch (message._tag) {
    case "Delta": {
      const { delta } = message
      // After a tool call's arguments, text that goes on gets its head again.
      const head =
        delta.offset === 0 || screen.inToolCall !== undefined
          ? `${newline}assistant (step ${delta.step}, attempt ${delta.attempt}): `
          : ""
      const streamed = new Set(screen.streamed).add(stepKey(delta.turnId, delta.step))
      return { text: head + delta.text, screen: { midText: true, streamed } }
    }
    case "ToolDelta": {
      const { delta } = message
      const key = `${stepKey(delta.turnId, delta.step)}#${delta.attempt}:${delta.toolCallId}`
      // A new head when another call's (or the text's) output was in between; a call's pieces otherwise run on.
      const head =
        screen.midText && screen.inToolCall === key
          ? ""
          : `${newline}tool call ${delta.toolCallId} (step ${delta.step}, attempt ${delta.attempt}) arguments${delta.offset === 0 ? "" : ` from ${delta.offset}`}: `
      return { text: head + delta.text, screen: { ...screen, midText: true, inToolCall: key } }
    }
    case "Partial": {
      const { partial, kind } = message
      const why =
        kind === "superseded"
          ? "superseded by a new attempt"
          : `${kind}${partial.reason === undefined ? "" : `: ${partial.reason}`}`
      return {
        text: `${newline}[attempt ${partial.attempt} of step ${partial.step}: ${partial.length} characters, ${why}; not the answer]\n`,
        screen: { ...screen, midText: false }
      }
    }
    case "StreamError":
      return {
        text: `${newline}[the server ended the stream: ${message.error}: ${message.message}]\n`,
        screen: { ...screen, midText: false }
      }
    case "Event": {
      const { event } = message
      const p = payloadOf(event)
      // An answer that did not stream (a provider that does not) is printed whole.
      const step = event.type === "model.responded" ? p.step : event.type === "turn.completed" ? p.steps : undefined
      const text = typeof p.text === "string" ? p.text : ""
      const unstreamed =
        step !== undefined && text !== "" && !screen.streamed.has(stepKey(String(p.turnId), Number(step)))
          ? `assistant: ${text}\n`
          : ""
      return { text: `${newline}${unstreamed}${eventLine(event)}\n`, screen: { ...screen, midText: false } }
    }
  }
}

const watch = Command.make(
  "watch",
  {
    ...Connection.connectionOptions,
    threadId: Args.text({ name: "threadId" }).pipe(Args.withDescription("The thread's id.")),
    untilIdle: Options.boolean("until-idle").pipe(
      Options.withDescription("Exit 0 once a turn ends and the thread has no turn running or queued.")
    )
  },
  (options) =>
    Effect.gen(function* () {
      const connection = yield* Connection.resolve(options)
      const path = { threadId: ServerClient.segment(options.threadId) }
      let last: string | undefined
      let screen = emptyScreen
      let idle = false
      const write = (text: string) => Effect.sync(() => process.stdout.write(text))
      const threadIdle = ServerClient.call(connection, (api) => api.threads.thread({ path })).pipe(
        Effect.map((thread) => thread.status === "idle")
      )
      /** Prints one message; false once the thread is idle and --until-idle was asked. */
      const print = (message: ServerClient.ThreadMessage) =>
        Effect.gen(function* () {
          if (message._tag !== "StreamError") last = message.id
          if (connection.json) {
            yield* Console.log(JSON.stringify(message))
          } else {
            const rendered = renderMessage(screen, message)
            screen = rendered.screen
            yield* write(rendered.text)
          }
          const ended =
            message._tag === "Event" && (message.event.type === "turn.completed" || message.event.type === "turn.ended")
          if (options.untilIdle && ended && (yield* threadIdle)) idle = true
          return !idle
        })
      const follow = Effect.suspend(() =>
        ServerClient.threadStream(connection, options.threadId, last).pipe(Stream.runForEachWhile(print))
      )
      yield* Console.error(`watching thread ${options.threadId} (Ctrl-C to stop)`)
      // The first connection must work (exit 3, 4 or 5 otherwise); after that, keep following.
      yield* follow
      // A restarting server refuses connections or answers 503 for a while: wait for it, backing off
      // to one try every 5 s. Anything else (a revoked token, a deleted thread) ends the command.
      const reconnect = follow.pipe(
        Effect.retry({
          schedule: Schedule.exponential("200 millis").pipe(Schedule.union(Schedule.spaced("5 seconds"))),
          while: (error) => error._tag === "ServerUnreachable" || error._tag === "ServerFailed"
        })
      )
      while (!idle) {
        yield* Console.error(
          `${screen.midText ? "\n" : ""}the thread stream ended at ${last ?? "its start"}; reconnecting`
        )
        screen = { ...screen, midText: false }
        yield* reconnect
      }
    })
).pipe(
  Command.withDescription(
    "Follow a thread live: the answer as it grows, one line per event (--json: one JSON object per message), until interrupted or, with --until-idle, until the thread is idle."
  )
)

export { watch }
