/**
 * An SSE client that follows /v1/events/stream across server restarts, reconnecting with
 * Last-Event-ID, and records every sequence it saw: the invariant is every event exactly once.
 */
import { resumableSse } from "./ResumableSse.js"

export const follow = (baseUrl: () => string | undefined) => {
  const seen: Array<number> = []
  const client = resumableSse(baseUrl, "/v1/events/stream", (frame) => {
    if (frame.id === undefined) return undefined
    seen.push(Number(frame.id))
    return frame.id
  })
  return { seen, reconnects: client.connects, stop: client.stop }
}
