/**
 * An SSE client that follows /v1/events/stream across server restarts, reconnecting with
 * Last-Event-ID, and records every sequence it saw: the invariant is every event exactly once.
 */
import { sleep } from "./ServerProcess.js"

export const follow = (baseUrl: () => string | undefined) => {
  const seen: Array<number> = []
  let stopped = false
  let lastId = 0
  let reconnects = 0
  const loop = async () => {
    while (!stopped) {
      const base = baseUrl()
      if (base === undefined) {
        await sleep(50)
        continue
      }
      try {
        const controller = new AbortController()
        const stopCheck = setInterval(() => stopped && controller.abort(), 100)
        const response = await fetch(`${base}/v1/events/stream`, {
          headers: lastId > 0 ? { "last-event-id": String(lastId) } : {},
          signal: controller.signal
        })
        reconnects++
        const reader = response.body!.getReader()
        const decoder = new TextDecoder()
        let buffer = ""
        try {
          while (!stopped) {
            const { value, done } = await reader.read()
            if (done) break
            buffer += decoder.decode(value, { stream: true })
            let split: number
            while ((split = buffer.indexOf("\n\n")) >= 0) {
              const frame = buffer.slice(0, split)
              buffer = buffer.slice(split + 2)
              const id = frame.split("\n").find((line) => line.startsWith("id:"))
              if (id !== undefined) {
                const sequence = Number(id.slice(3).trim())
                seen.push(sequence)
                lastId = sequence
              }
            }
          }
        } finally {
          clearInterval(stopCheck)
        }
      } catch {
        // swallow-ok: the server was killed mid-stream; reconnect with Last-Event-ID
      }
      await sleep(50)
    }
  }
  const running = loop()
  return {
    seen,
    reconnects: () => reconnects,
    stop: async () => {
      stopped = true
      await running
    }
  }
}
