/**
 * The loop both chaos SSE readers share: GET `path` on whichever server is up, hand each whole
 * frame on, and when the connection ends (a SIGKILL, a restart) connect again with Last-Event-ID,
 * the id of the last whole frame taken. A frame cut off by a kill is never handed on.
 */
import { sleep } from "./ServerProcess.js"

export interface SseFrame {
  readonly id?: string | undefined
  readonly event?: string | undefined
  readonly data?: string | undefined
}

/** Parses whole frames off the front of `buffer`; answers them and what is left. */
export const takeFrames = (buffer: string): { readonly frames: Array<SseFrame>; readonly rest: string } => {
  const frames: Array<SseFrame> = []
  let rest = buffer
  let split: number
  while ((split = rest.indexOf("\n\n")) >= 0) {
    const lines = rest.slice(0, split).split("\n")
    rest = rest.slice(split + 2)
    const field = (name: string) =>
      lines
        .find((l) => l.startsWith(`${name}:`))
        ?.slice(name.length + 1)
        .trim()
    frames.push({ id: field("id"), event: field("event"), data: field("data") })
  }
  return { frames, rest }
}

export const resumableSse = (
  baseUrl: () => string | undefined,
  path: string,
  /** Takes a frame; answers the id to resume after, if it moves the position. */
  onFrame: (frame: SseFrame) => string | undefined
) => {
  let stopped = false
  let lastId: string | undefined
  let connects = 0
  const loop = async () => {
    while (!stopped) {
      const base = baseUrl()
      if (base === undefined) {
        await sleep(50)
        continue
      }
      const controller = new AbortController()
      const stopCheck = setInterval(() => stopped && controller.abort(), 100)
      try {
        const response = await fetch(`${base}${path}`, {
          headers: lastId === undefined ? {} : { "last-event-id": lastId },
          signal: controller.signal
        })
        // 404 before a thread's first message; 503 while the server boots: try again.
        if (response.status !== 200) {
          await response.body?.cancel()
          await sleep(100)
          continue
        }
        connects++
        const reader = response.body!.getReader()
        const decoder = new TextDecoder()
        let buffer = ""
        while (!stopped) {
          const { value, done } = await reader.read()
          if (done) break
          const taken = takeFrames(buffer + decoder.decode(value, { stream: true }))
          buffer = taken.rest
          for (const frame of taken.frames) lastId = onFrame(frame) ?? lastId
        }
      } catch {
        // swallow-ok: the server was killed mid-stream; reconnect with Last-Event-ID
      } finally {
        clearInterval(stopCheck)
      }
      await sleep(50)
    }
  }
  const running = loop()
  return {
    connects: () => connects,
    lastId: () => lastId,
    stop: async () => {
      stopped = true
      await running
    }
  }
}
