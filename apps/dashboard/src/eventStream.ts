/**
 * Following GET /v1/events/stream with fetch rather than EventSource: fetch can send the token as
 * an Authorization header (so it never lands in a URL), and reads every named event (EventSource
 * only delivers the names it was told about). Reconnects with `?after=` the last sequence seen,
 * so nothing is missed or seen twice.
 */
import { authorization } from "./token.js"

export interface StreamEvent {
  readonly sequence: number
  readonly aggregateType: string
  readonly aggregateId: string
  readonly type: string
  readonly occurredAt: number
}

export interface SseMessage {
  readonly id?: string
  readonly event?: string
  readonly data: string
}

/** Pure: splits buffered SSE text into complete messages and the unfinished rest. */
export const parseSse = (buffer: string): { readonly messages: ReadonlyArray<SseMessage>; readonly rest: string } => {
  const messages: Array<SseMessage> = []
  const blocks = buffer.replace(/\r\n/g, "\n").split("\n\n")
  const rest = blocks.pop() ?? ""
  for (const block of blocks) {
    let id: string | undefined
    let event: string | undefined
    const data: Array<string> = []
    for (const line of block.split("\n")) {
      if (line === "" || line.startsWith(":")) continue
      const colon = line.indexOf(":")
      const field = colon === -1 ? line : line.slice(0, colon)
      const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "")
      if (field === "id") id = value
      else if (field === "event") event = value
      else if (field === "data") data.push(value)
    }
    if (data.length > 0)
      messages.push({
        ...(id === undefined ? {} : { id }),
        ...(event === undefined ? {} : { event }),
        data: data.join("\n")
      })
  }
  return { messages, rest }
}

export type StreamState = "connecting" | "live" | "reconnecting" | "unauthorized"

export interface FollowOptions {
  readonly after: number
  readonly onEvent: (event: StreamEvent) => void
  readonly onState: (state: StreamState) => void
}

/** One server-sent-event stream the page follows, reconnecting after a drop. */
interface SseConnection {
  /** Names the stream in the console's warnings. */
  readonly name: string
  /** The next attempt's URL and extra headers (they may depend on what was seen so far). */
  readonly request: () => { readonly url: string; readonly headers?: Record<string, string> }
  readonly onMessage: (message: SseMessage) => void
  readonly onState: (state: StreamState) => void
}

/** Follows a stream until the returned function is called; backs off 1 s → 10 s between attempts. */
const followSse = (connection: SseConnection): (() => void) => {
  const controller = new AbortController()
  let delay = 1000
  const run = async () => {
    while (!controller.signal.aborted) {
      connection.onState("connecting")
      try {
        const request = connection.request()
        const headers: Record<string, string> = { accept: "text/event-stream", ...request.headers }
        const auth = authorization()
        if (auth !== undefined) headers.authorization = auth
        const response = await fetch(request.url, { headers, signal: controller.signal })
        if (response.status === 401) {
          connection.onState("unauthorized")
          return
        }
        if (!response.ok || response.body === null) throw new Error(`${connection.name} answered ${response.status}`)
        connection.onState("live")
        delay = 1000
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
        let buffer = ""
        while (true) {
          const { done, value } = await reader.read()
          if (done) break
          const parsed = parseSse(buffer + value)
          buffer = parsed.rest
          for (const message of parsed.messages) connection.onMessage(message)
        }
      } catch (error) {
        if (controller.signal.aborted) return
        console.warn(`${connection.name} interrupted; reconnecting`, error)
      }
      if (controller.signal.aborted) return
      connection.onState("reconnecting")
      await new Promise((resolve) => setTimeout(resolve, delay))
      delay = Math.min(10_000, delay * 2)
    }
  }
  void run()
  return () => controller.abort()
}

/** Follows the log until the returned function is called, after the last event seen on every reconnect. */
export const follow = (options: FollowOptions): (() => void) => {
  let after = options.after
  return followSse({
    name: "event stream",
    request: () => ({ url: `/v1/events/stream?after=${after}` }),
    onMessage: (message) => {
      if (message.event === "error") return
      const event = JSON.parse(message.data) as StreamEvent
      after = Math.max(after, event.sequence)
      options.onEvent(event)
    },
    onState: options.onState
  })
}

export interface FollowThreadOptions {
  readonly threadId: string
  readonly onMessage: (message: { readonly kind: string; readonly data: unknown }) => void
  readonly onState: (state: StreamState) => void
}

/**
 * Follows one thread's stream (GET /v1/threads/:id/stream) until the returned function is called:
 * from the thread's start, then after the last message's id on every reconnect (Last-Event-ID),
 * so each event and delta arrives once.
 */
export const followThread = (options: FollowThreadOptions): (() => void) => {
  let last: string | undefined
  return followSse({
    name: "thread stream",
    request: () => ({
      url: `/v1/threads/${encodeURIComponent(options.threadId)}/stream`,
      headers: last === undefined ? {} : { "last-event-id": last }
    }),
    onMessage: (message) => {
      if (message.event === "error" || message.event === undefined) return
      if (message.id !== undefined) last = message.id
      options.onMessage({ kind: message.event, data: JSON.parse(message.data) })
    },
    onState: options.onState
  })
}
