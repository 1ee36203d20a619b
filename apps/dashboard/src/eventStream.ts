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

/** Follows the log until the returned function is called; backs off 1 s → 10 s between attempts. */
export const follow = (options: FollowOptions): (() => void) => {
  const controller = new AbortController()
  let after = options.after
  let delay = 1000
  const run = async () => {
    while (!controller.signal.aborted) {
      options.onState("connecting")
      try {
        const headers: Record<string, string> = { accept: "text/event-stream" }
        const auth = authorization()
        if (auth !== undefined) headers.authorization = auth
        const response = await fetch(`/v1/events/stream?after=${after}`, { headers, signal: controller.signal })
        if (response.status === 401) {
          options.onState("unauthorized")
          return
        }
        if (!response.ok || response.body === null) throw new Error(`stream answered ${response.status}`)
        options.onState("live")
        delay = 1000
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
        let buffer = ""
        while (true) {
          const { done, value } = await reader.read()
          if (done) break
          const parsed = parseSse(buffer + value)
          buffer = parsed.rest
          for (const message of parsed.messages) {
            if (message.event === "error") continue
            const event = JSON.parse(message.data) as StreamEvent
            after = Math.max(after, event.sequence)
            options.onEvent(event)
          }
        }
      } catch (error) {
        if (controller.signal.aborted) return
        console.warn("event stream interrupted; reconnecting", error)
      }
      if (controller.signal.aborted) return
      options.onState("reconnecting")
      await new Promise((resolve) => setTimeout(resolve, delay))
      delay = Math.min(10_000, delay * 2)
    }
  }
  void run()
  return () => controller.abort()
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
  const controller = new AbortController()
  let last: string | undefined
  let delay = 1000
  const run = async () => {
    while (!controller.signal.aborted) {
      options.onState("connecting")
      try {
        const headers: Record<string, string> = { accept: "text/event-stream" }
        const auth = authorization()
        if (auth !== undefined) headers.authorization = auth
        if (last !== undefined) headers["last-event-id"] = last
        const response = await fetch(`/v1/threads/${encodeURIComponent(options.threadId)}/stream`, {
          headers,
          signal: controller.signal
        })
        if (response.status === 401) {
          options.onState("unauthorized")
          return
        }
        if (!response.ok || response.body === null) throw new Error(`thread stream answered ${response.status}`)
        options.onState("live")
        delay = 1000
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
        let buffer = ""
        while (true) {
          const { done, value } = await reader.read()
          if (done) break
          const parsed = parseSse(buffer + value)
          buffer = parsed.rest
          for (const message of parsed.messages) {
            if (message.event === "error" || message.event === undefined) continue
            if (message.id !== undefined) last = message.id
            options.onMessage({ kind: message.event, data: JSON.parse(message.data) })
          }
        }
      } catch (error) {
        if (controller.signal.aborted) return
        console.warn("thread stream interrupted; reconnecting", error)
      }
      if (controller.signal.aborted) return
      options.onState("reconnecting")
      await new Promise((resolve) => setTimeout(resolve, delay))
      delay = Math.min(10_000, delay * 2)
    }
  }
  void run()
  return () => controller.abort()
}
