/**
 * An SSE client per chaos thread on GET /v1/threads/:id/stream, across every SIGKILL and restart:
 * it reconnects with Last-Event-ID (the position of the last whole message it got) and keeps every
 * message. `judge` (pure) then says what a reader must have seen: each delta of each attempt
 * exactly once (per attempt and channel the offsets run on with no gap and no repeat), each thread
 * event once, every attempt a later one replaced marked superseded, each step's last attempt equal
 * to the answer its `model.responded` recorded (text and tool-call arguments), and the text the
 * store holds for every attempt (`StoredChunk`) equal to what the reader got.
 */
import { Thread } from "@orchestration/agents"
import { Api, ThreadStream } from "@orchestration/server"
import { Schema } from "effect"
import { resumableSse } from "./ResumableSse.js"
import { sleep } from "./ServerProcess.js"

/** One message of the stream, its data decoded with the schema the server serves it with. */
export type SseMessage =
  | { readonly id: string; readonly event: "thread-event"; readonly data: typeof Api.EventView.Type }
  | { readonly id: string; readonly event: "delta"; readonly data: ThreadStream.DeltaView }
  | { readonly id: string; readonly event: "tool-delta"; readonly data: ThreadStream.ToolDeltaView }
  | {
      readonly id: string
      readonly event: "superseded" | "interrupted" | "failed"
      readonly data: ThreadStream.PartialView
    }

const decodeEvent = Schema.decodeUnknownSync(Schema.parseJson(Api.EventView))
const decodeDelta = Schema.decodeUnknownSync(Schema.parseJson(ThreadStream.DeltaView))
const decodeToolDelta = Schema.decodeUnknownSync(Schema.parseJson(ThreadStream.ToolDeltaView))
const decodePartial = Schema.decodeUnknownSync(Schema.parseJson(ThreadStream.PartialView))
const decodeThreadEvent = Schema.decodeUnknownSync(Thread.ThreadEvent)

/** The message a frame carries; undefined for an event name the judge does not look at. */
const messageOf = (id: string, event: string, data: string): SseMessage | undefined => {
  switch (event) {
    case "thread-event":
      return { id, event, data: decodeEvent(data) }
    case "delta":
      return { id, event, data: decodeDelta(data) }
    case "tool-delta":
      return { id, event, data: decodeToolDelta(data) }
    case "superseded":
    case "interrupted":
    case "failed":
      return { id, event, data: decodePartial(data) }
    default:
      return undefined
  }
}

export const followThread = (baseUrl: () => string | undefined, threadId: string) => {
  const messages: Array<SseMessage> = []
  const client = resumableSse(baseUrl, `/v1/threads/${encodeURIComponent(threadId)}/stream`, (frame) => {
    // A comment or heartbeat has no id, event and data.
    if (frame.id === undefined || frame.event === undefined || frame.data === undefined) return undefined
    const message = messageOf(frame.id, frame.event, frame.data)
    if (message !== undefined) messages.push(message)
    return frame.id
  })
  return {
    threadId,
    messages,
    connects: client.connects,
    /** The highest log sequence this reader has reached (its position's first number). */
    reached: () => Number(client.lastId()?.split(":")[0] ?? 0),
    stop: client.stop
  }
}

export type ThreadReader = ReturnType<typeof followThread>

/**
 * Waits (until `deadline`) for each reader to reach its thread's last event in `events`, then stops
 * them all. Answers a line for each reader left behind: the judge counts only what readers got, so a
 * stream that stopped following (a lost wake-up, a resume that stalls) must fail the run itself.
 */
export const settleReaders = async (
  readers: ReadonlyArray<ThreadReader>,
  events: ReadonlyArray<typeof Api.EventView.Type>,
  deadline: number
): Promise<Array<string>> => {
  const behind: Array<string> = []
  for (const reader of readers) {
    const last = Math.max(
      0,
      ...events.filter((e) => e.aggregateType === "thread" && e.aggregateId === reader.threadId).map((e) => e.sequence)
    )
    while (reader.reached() < last && Date.now() < deadline) await sleep(50)
    await reader.stop()
    if (reader.reached() < last)
      behind.push(`sse reader of ${reader.threadId} stopped at ${reader.reached()}; its thread's last event is ${last}`)
  }
  return behind
}

/** A chunk as the store holds it (effect_stream_chunks). */
export interface StoredChunk {
  readonly effectId: string
  readonly attempt: number
  readonly start: number
  readonly end: number
  readonly channel: string
  readonly text: string
}

export interface StreamVerdict {
  deltas: number
  dups: number
  gaps: number
  /** Attempts replaced by a later one with no superseded (or other closing) notice. */
  unmarked: number
  /** Steps whose last attempt's deltas are not the answer recorded. */
  answerMismatches: number
  /** Store chunks of one attempt that overlap or leave a hole (recorded twice, or lost). */
  storeDuplicates: number
  /** Attempts whose text in the store differs from what the reader got. */
  storeMismatches: number
  superseded: number
  details: Array<string>
}

const stepKey = (turnId: string, step: number) => `${turnId}#${step}`
/** The key of one channel of one attempt: text (`""`) or a tool call's arguments. */
const channelKey = (turnId: string, step: number, attempt: number, channel: string) =>
  `${stepKey(turnId, step)}@${attempt}/${channel}`

/** The model step a chunk's effect id names (`step:<turnId>#<n>`, Thread.stepEffectId). */
const stepOfEffect = (effectId: string) => {
  const match = /^step:(.*)#(\d+)$/.exec(effectId)
  return match === null ? undefined : { turnId: match[1]!, step: Number(match[2]) }
}

/** The thread's own event a stream event carries, decoded with the agents domain's schema (undefined: another aggregate's). */
const threadEventOf = (event: typeof Api.EventView.Type): Thread.ThreadEvent | undefined =>
  event.aggregateType === "thread" ? decodeThreadEvent(event.payload) : undefined

/** Pure: the verdict over every thread's messages and the store's chunks. */
export const judge = (
  threads: ReadonlyArray<{ readonly threadId: string; readonly messages: ReadonlyArray<SseMessage> }>,
  stored: ReadonlyArray<StoredChunk>
): StreamVerdict => {
  const v: StreamVerdict = {
    deltas: 0,
    dups: 0,
    gaps: 0,
    unmarked: 0,
    answerMismatches: 0,
    storeDuplicates: 0,
    storeMismatches: 0,
    superseded: 0,
    details: []
  }
  const seenText = new Map<string, string>()
  const followedTurns = new Set<string>()
  for (const { threadId, messages } of threads) {
    const sequences = new Set<number>()
    /** Per step: the attempts with deltas, and those a notice closed. */
    const attempts = new Map<string, Set<number>>()
    const closed = new Set<string>()
    for (const m of messages) {
      if (m.event === "thread-event") {
        if (sequences.has(m.data.sequence)) {
          v.dups++
          v.details.push(`${threadId}: event ${m.data.sequence} seen twice`)
        }
        sequences.add(m.data.sequence)
        const event = threadEventOf(m.data)
        if (event?.type === "turn.started") followedTurns.add(event.turnId)
        continue
      }
      if (m.event === "superseded" || m.event === "interrupted" || m.event === "failed") {
        const d = m.data
        closed.add(`${stepKey(d.turnId, d.step)}@${d.attempt}`)
        if (m.event === "superseded") v.superseded++
        continue
      }
      if (m.event !== "delta" && m.event !== "tool-delta") continue
      v.deltas++
      const d = m.data
      const key = channelKey(d.turnId, d.step, d.attempt, m.event === "delta" ? "" : m.data.toolCallId)
      const text = seenText.get(key) ?? ""
      if (d.offset < text.length) {
        v.dups++
        v.details.push(`${threadId}: ${key} delta at ${d.offset} repeats (had ${text.length})`)
      } else if (d.offset > text.length) {
        v.gaps++
        v.details.push(`${threadId}: ${key} delta at ${d.offset} skips from ${text.length}`)
      }
      seenText.set(key, text.slice(0, d.offset) + d.text)
      const step = stepKey(d.turnId, d.step)
      attempts.set(step, (attempts.get(step) ?? new Set()).add(d.attempt))
    }
    for (const [step, set] of attempts) {
      const last = Math.max(...set)
      for (const attempt of set) {
        if (attempt < last && !closed.has(`${step}@${attempt}`)) {
          v.unmarked++
          v.details.push(`${threadId}: ${step} attempt ${attempt} replaced by ${last} without a notice`)
        }
      }
    }
    // Each answer recorded is its step's last attempt as streamed.
    for (const m of messages) {
      if (m.event !== "thread-event") continue
      const p = threadEventOf(m.data)
      if (p?.type !== "model.responded") continue
      const tried = attempts.get(stepKey(p.turnId, p.step))
      const last = tried === undefined ? 1 : Math.max(...tried)
      const text = seenText.get(channelKey(p.turnId, p.step, last, "")) ?? ""
      const args = p.toolCalls.map((c) => seenText.get(channelKey(p.turnId, p.step, last, c.callId)) ?? "")
      const argsMatch = p.toolCalls.every((c, i) => {
        try {
          return JSON.stringify(JSON.parse(args[i]!)) === JSON.stringify(c.arguments)
        } catch {
          return false
        }
      })
      if (text !== (p.text ?? "") || !argsMatch) {
        v.answerMismatches++
        v.details.push(
          `${threadId}: ${stepKey(p.turnId, p.step)} answered ${JSON.stringify(p.text)}, streamed ${JSON.stringify(text)}`
        )
      }
    }
  }
  // The store: each attempt's chunks contiguous from 0, and equal, per channel, to what was read.
  const byAttempt = new Map<string, Array<StoredChunk>>()
  for (const c of stored) {
    const key = `${c.effectId}@${c.attempt}`
    byAttempt.set(key, [...(byAttempt.get(key) ?? []), c])
  }
  for (const [key, chunks] of byAttempt) {
    chunks.sort((a, b) => a.start - b.start)
    let end = 0
    for (const c of chunks) {
      if (c.start !== end) {
        v.storeDuplicates++
        v.details.push(`store: ${key} chunk at ${c.start} after ${end}`)
      }
      end = c.end
    }
    const step = stepOfEffect(chunks[0]!.effectId)
    if (step === undefined || !followedTurns.has(step.turnId)) continue
    const channels = new Map<string, string>()
    for (const c of chunks) channels.set(c.channel, (channels.get(c.channel) ?? "") + c.text)
    for (const [channel, text] of channels) {
      const shown = channel === "" ? channel : channel.replace(/^tool:/, "")
      const read = seenText.get(channelKey(step.turnId, step.step, chunks[0]!.attempt, shown)) ?? ""
      if (read !== text) {
        v.storeMismatches++
        v.details.push(`store: ${key}/${channel} holds ${text.length} units, the reader got ${read.length}`)
      }
    }
  }
  return v
}
