/**
 * One thread, live: its committed events and the running model step's text as it grows, as one
 * ordered sequence of messages that a client can resume anywhere. The order is fixed by the store:
 * events in log order; the chunks of a step (StreamChunks) after the event that started it and
 * before the event that closed it (all of a step's chunks commit before its settlement, because a
 * settled row takes no more). Every message carries the whole position it leaves the reader at, so
 * a resume (`Last-Event-ID`) after a reconnect or a server restart continues after it with no gap
 * and no repeat: nothing of this lives in memory between connections.
 *
 * The id of a message (its position), in one of two forms:
 * - `<seq>`: the reader has every event of the thread up to log sequence `seq`, and no step is live;
 * - `<seq>:<step>:<attempt>:<end>:<turnId>`: the same, and step `step` of turn `turnId` is live, with
 *   its attempt `attempt`'s stream delivered up to offset `end` (UTF-16 units of the attempt's one
 *   order, its text and tool-call arguments together); `end` 0 means none of that attempt yet. After an attempt's closing notice (superseded, interrupted, failed) the
 *   position is `<attempt + 1>:0`, so the notice is not sent again. The turn id comes last: it may
 *   hold `:`.
 * What makes a step live, and what closes it, is the domain's (`ThreadStreamRules`).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { type Engine, type EventRecord, Outbox, StorageErrors, type StorageFailure } from "@orchestration/engine"
import { Chunk, Clock, Duration, Effect, Schema, Stream } from "effect"
import { eventJson } from "./http/Sse.js"

/** The step whose text is streaming (or about to): the domain names it by turn and step number. */
export interface StepRef {
  readonly turnId: string
  readonly step: number
}

/** What an event does to the live step. `close`: the step ended here (its chunks are all in). */
export interface StepTransition {
  readonly close?: { readonly status: "completed" | "interrupted" | "failed"; readonly reason?: string }
  /** The step live after this event (null: none). */
  readonly next: StepRef | null
}

/** The domain's part: which events are the thread's, how they move the live step, and its effect. */
export interface ThreadStreamRules {
  readonly aggregateType: string
  /** Undefined: the event leaves the live step as it is. */
  readonly transition: (live: StepRef | null, event: EventRecord) => StepTransition | undefined
  readonly stepEffectId: (step: StepRef) => string
  /** The tool call whose arguments a stream channel carries (undefined: not shown; only the position moves). */
  readonly toolCallOfChannel?: (channel: string) => string | undefined
}

export interface LivePosition extends StepRef {
  readonly attempt: number
  readonly end: number
}

export interface Position {
  readonly seq: number
  readonly live: LivePosition | null
}

export const start: Position = { seq: 0, live: null }

export const formatPosition = (position: Position): string =>
  position.live === null
    ? String(position.seq)
    : `${position.seq}:${position.live.step}:${position.live.attempt}:${position.live.end}:${position.live.turnId}`

const whole = /^(0|[1-9][0-9]{0,15})$/
/**
 * A turn id as a position may carry it: visible ASCII, bounded (a thread id and a message id of 128
 * each and their separator fit). The id is written back in every `id:` line, so a line break would
 * frame the client's text as an SSE message of its own, and a long one would repeat in each.
 */
const turnIdText = /^[\x21-\x7e]{1,300}$/

/** Parses an id of this stream; a string saying what is wrong when it is not one. */
export const parsePosition = (text: string): Position | { readonly problem: string } => {
  const parts = text.trim().split(":")
  const numbers = parts.slice(0, 4)
  const problem = {
    problem:
      "a thread stream position is <seq> or <seq>:<step>:<attempt>:<end>:<turnId> (whole numbers, then the turn id)"
  }
  if (!numbers.every((n) => whole.test(n))) return problem
  const [seq, step, attempt, end] = numbers.map(Number) as [number, number?, number?, number?]
  if (parts.length === 1) return { seq, live: null }
  const turnId = parts.slice(4).join(":")
  if (parts.length < 5 || !turnIdText.test(turnId) || step === undefined || step < 1) return problem
  return { seq, live: { turnId, step, attempt: attempt!, end: end! } }
}

/** Which attempt of which step of which turn a live message speaks of. */
const stepAttempt = { turnId: Schema.String, step: Schema.Number, attempt: Schema.Number }

/** `event: delta`: text of the live step's attempt `attempt`, starting at `offset`. */
export const DeltaView = Schema.Struct({ ...stepAttempt, offset: Schema.Number, text: Schema.String })
export type DeltaView = typeof DeltaView.Type

/**
 * `event: tool-delta`: argument text of tool call `toolCallId` of the live step's attempt `attempt`,
 * starting at `offset` within that call's arguments (their JSON as the provider streams it).
 */
export const ToolDeltaView = Schema.Struct({
  ...stepAttempt,
  toolCallId: Schema.String,
  offset: Schema.Number,
  text: Schema.String
})
export type ToolDeltaView = typeof ToolDeltaView.Type

/**
 * `event: superseded | interrupted | failed`: the partial text of attempt `attempt` (`length`: how
 * far its stream went, text and tool-call arguments together) will never be the step's answer: a newer attempt replaced it (a crash, a retry),
 * the turn was interrupted, or it failed. It stays visible, outside the transcript.
 */
export const PartialView = Schema.Struct({
  ...stepAttempt,
  length: Schema.Number,
  reason: Schema.optional(Schema.String)
})
export type PartialView = typeof PartialView.Type

export type StreamMessage =
  | { readonly kind: "thread-event"; readonly position: Position; readonly data: ReturnType<typeof eventJson> }
  | { readonly kind: "delta"; readonly position: Position; readonly data: DeltaView }
  | { readonly kind: "tool-delta"; readonly position: Position; readonly data: ToolDeltaView }
  | {
      readonly kind: "superseded" | "interrupted" | "failed"
      readonly position: Position
      readonly data: PartialView
    }

/** One SSE message. JSON.stringify never emits a raw newline, so `data:` stays one line. */
export const formatMessage = (message: StreamMessage): string =>
  `id: ${formatPosition(message.position)}\nevent: ${message.kind}\ndata: ${JSON.stringify(message.data)}\n\n`

/** Pages are small so one connection holds little: at most this many events, or chunks, at a time. */
const EVENT_PAGE = 100
const CHUNK_PAGE = 64
/** Contiguous chunks of one attempt are sent as one delta up to this many UTF-16 units. */
const DELTA_MAX = 16 * 1024

export interface FollowThreadOptions {
  readonly engine: Engine.EngineShape
  readonly sql: SqlClient
  readonly rules: ThreadStreamRules
  readonly threadId: string
  readonly from: Position
}

/**
 * The thread's messages after `from`, catching up from the store, then following commits (woken by
 * the engine's hint for this thread's aggregate, rung after every accepted command of the thread: its
 * events, its step's chunks and settlement; commits of other threads do not wake it). A wake-up by
 * commits that wrote no event of the thread (its step's chunks alone) reads only the chunks. Never
 * ends by itself.
 */
export const follow = (options: FollowThreadOptions): Stream.Stream<StreamMessage, StorageFailure> =>
  Stream.unwrapScoped(
    Effect.gen(function* () {
      const { engine, rules } = options
      // Subscribe before the first read: a commit between a read and the wait still wakes us.
      const follower = yield* engine.followAggregate(rules.aggregateType, options.threadId)
      const hints = follower.changed
      let position = options.from
      /** Events read but not yet sent. */
      let buffered: Array<EventRecord> = []
      /** The event that closes the live step, held until the step's remaining chunks are sent. */
      let closing: { readonly event: EventRecord; readonly transition: StepTransition } | undefined
      /**
       * The last reads found no event and less than a page of chunks: everything committed before
       * them was sent, and anything after rings the hint, so wait for it instead of reading again
       * (half the reads per wake-up when every commit of a stream brings one delta).
       */
      let caughtUp = false
      /**
       * Events may be waiting: the last event read was a full page, or a commit that rang us may have
       * written the thread's events. A wake-up by a chunk commit alone reads only the chunks.
       */
      let eventsDue = false

      const stepRow = (effectId: string) =>
        Outbox.find(effectId).pipe(
          Effect.mapError(StorageErrors.toStorageFailure("read step effect")),
          Effect.provideService(SqlClient, options.sql)
        )
      const finalAttempt = (effectId: string) => Effect.map(stepRow(effectId), (row) => row?.attempts ?? 0)

      /**
       * A step cancelled under a performer that has not said it stopped may still flush the text it
       * had buffered (StreamChunks.decideChunk): its close waits for that word, or for its lease to
       * run out (a performer that died as it stopped), so the notice counts all of the partial text.
       * The milliseconds left of that lease (undefined: no end), or undefined when nothing is stopping.
       */
      const stopping = (live: LivePosition) =>
        Effect.zipWith(stepRow(rules.stepEffectId(live)), Clock.currentTimeMillis, (row, now) =>
          row !== undefined &&
          row.status === "cancelled" &&
          row.leaseOwner !== null &&
          (row.leaseExpiresAt === null || row.leaseExpiresAt > now)
            ? { leaseLeftMs: row.leaseExpiresAt === null ? undefined : row.leaseExpiresAt - now }
            : undefined
        )

      /** A page of the live step's chunks after the position, as deltas and superseded notices. */
      const chunkPage = (live: LivePosition) =>
        Effect.map(
          engine.readStreamChunks(rules.stepEffectId(live), {
            after: { attempt: live.attempt, end: live.end },
            limit: CHUNK_PAGE
          }),
          (chunks) => {
            const out: Array<StreamMessage> = []
            let at = live
            /** Contiguous chunks of one channel of one attempt, sent as one message; `end` in the attempt's order. */
            let pending: { channel: string; attempt: number; offset: number; text: string; end: number } | undefined
            const flush = () => {
              if (pending === undefined) return
              at = { ...at, attempt: pending.attempt, end: pending.end }
              const { turnId, step } = at
              const { attempt, offset, text } = pending
              const toolCallId = pending.channel === "" ? undefined : rules.toolCallOfChannel?.(pending.channel)
              const position = { seq: positionSeq(), live: at }
              // A channel no reader knows (not main text, not a tool call's) only moves the position.
              if (pending.channel === "") {
                out.push({ kind: "delta", position, data: { turnId, step, attempt, offset, text } })
              } else if (toolCallId !== undefined) {
                out.push({ kind: "tool-delta", position, data: { turnId, step, attempt, toolCallId, offset, text } })
              }
              pending = undefined
            }
            for (const chunk of chunks) {
              // The attempt being sent is the pending delta's, once there is one (`at` moves at its flush).
              if (chunk.attempt > (pending?.attempt ?? at.attempt)) {
                flush()
                if (at.end > 0) {
                  const notice = partial(at)
                  at = { ...at, attempt: at.attempt + 1, end: 0 }
                  out.push({ kind: "superseded", position: { seq: position.seq, live: at }, data: notice })
                }
              } else if (
                pending !== undefined &&
                (pending.text.length >= DELTA_MAX || pending.channel !== chunk.channel)
              ) {
                flush()
              }
              pending =
                pending === undefined
                  ? {
                      channel: chunk.channel,
                      attempt: chunk.attempt,
                      offset: chunk.channelStart,
                      text: chunk.text,
                      end: chunk.end
                    }
                  : { ...pending, text: pending.text + chunk.text, end: chunk.end }
            }
            flush()
            if (at !== live) position = { seq: position.seq, live: at }
            return { out, full: chunks.length >= CHUNK_PAGE }
          }
        )

      /** The next messages of the live step's chunks; pages of only unshown channels are stepped over. */
      const chunkMessages = (
        live: LivePosition
      ): Effect.Effect<{ readonly messages: Array<StreamMessage>; readonly full: boolean }, StorageFailure> =>
        Effect.flatMap(chunkPage(live), ({ out, full }) =>
          out.length === 0 && full && position.live !== null
            ? chunkMessages(position.live)
            : Effect.succeed({ messages: out, full })
        )

      const positionSeq = () => position.seq

      const partial = (live: LivePosition, reason?: string): PartialView => ({
        turnId: live.turnId,
        step: live.step,
        attempt: live.attempt,
        length: live.end,
        ...(reason === undefined ? {} : { reason })
      })

      /** The notice for the live attempt's text when its step closes, if that text is not the answer. */
      const closeNotice = (live: LivePosition, close: NonNullable<StepTransition["close"]>) =>
        Effect.gen(function* () {
          if (live.end === 0) return undefined
          if (close.status !== "completed") return { kind: close.status, reason: close.reason } as const
          const attempts = yield* finalAttempt(rules.stepEffectId(live))
          return attempts > live.attempt ? ({ kind: "superseded", reason: undefined } as const) : undefined
        })

      const emitEvent = (event: EventRecord, next: LivePosition | null): StreamMessage => {
        position = { seq: event.sequence, live: next }
        return { kind: "thread-event", position, data: eventJson(event) }
      }

      const toLive = (step: StepRef | null, current: LivePosition | null): LivePosition | null =>
        step === null
          ? null
          : current !== null && current.turnId === step.turnId && current.step === step.step
            ? current
            : { ...step, attempt: 0, end: 0 }

      const nextBatch: Effect.Effect<Chunk.Chunk<StreamMessage>, StorageFailure> = Effect.gen(function* () {
        while (true) {
          if (closing !== undefined) {
            const live = position.live
            if (live !== null) {
              const { messages } = yield* chunkMessages(live)
              if (messages.length > 0) return Chunk.fromIterable(messages)
            }
            const { event, transition } = closing
            const stopped =
              live !== null && transition.close?.status !== "completed" ? yield* stopping(live) : undefined
            if (stopped !== undefined) {
              // Both the tail's commit and the performer's word ring this thread's hint (the reactor
              // rings it with its word, a plain row update); a dead performer's lease ends on its own.
              yield* stopped.leaseLeftMs === undefined
                ? hints
                : Effect.raceFirst(hints, Effect.sleep(Duration.millis(stopped.leaseLeftMs)))
              continue
            }
            closing = undefined
            const out: Array<StreamMessage> = []
            const notice = live === null ? undefined : yield* closeNotice(live, transition.close!)
            if (live !== null && notice !== undefined) {
              const after = { ...live, attempt: live.attempt + 1, end: 0 }
              position = { seq: position.seq, live: after }
              out.push({ kind: notice.kind, position, data: partial(live, notice.reason) })
            }
            out.push(emitEvent(event, toLive(transition.next, null)))
            return Chunk.fromIterable(out)
          }
          const event = buffered.shift()
          if (event !== undefined) {
            if (event.aggregateType !== rules.aggregateType) continue
            const transition = rules.transition(position.live, event)
            if (transition === undefined) return Chunk.of(emitEvent(event, position.live))
            if (transition.close !== undefined && position.live !== null) {
              closing = { event, transition }
              continue
            }
            return Chunk.of(emitEvent(event, toLive(transition.next, position.live)))
          }
          if (!caughtUp) {
            // Caught up on what was read: read on. Events first, so a closing event is never
            // overtaken by a delta read after it.
            if (follower.takeEventsFlag()) eventsDue = true
            if (eventsDue) {
              const after = position.seq
              // The thread's aggregate named with its id: one aggregate's events commit in order, so the
              // read needs no commit horizon, which another aggregate's open transaction holds back on
              // PostgreSQL (by id alone the thread's events waited for it).
              buffered = [
                ...(yield* engine.readEvents({
                  after,
                  limit: EVENT_PAGE,
                  aggregateId: options.threadId,
                  aggregateType: rules.aggregateType
                }))
              ]
              eventsDue = buffered.length >= EVENT_PAGE
              if (buffered.length > 0) continue
            }
            if (position.live !== null) {
              const { messages, full } = yield* chunkMessages(position.live)
              caughtUp = !full
              if (messages.length > 0) return Chunk.fromIterable(messages)
            }
          }
          yield* hints
          caughtUp = false
        }
      })
      return Stream.repeatEffectChunk(nextBatch)
    })
  )

/** Reads the position of a request: `Last-Event-ID` wins over `?after=` (the first URL's). */
export const requestedPosition = (
  lastEventId: string | undefined,
  after: string | undefined
): Position | { readonly problem: string; readonly path: string } => {
  const [text, path] =
    lastEventId !== undefined && lastEventId.trim() !== "" ? [lastEventId, "Last-Event-ID"] : [after, "after"]
  if (text === undefined || text.trim() === "") return start
  const parsed = parsePosition(text)
  return "problem" in parsed ? { problem: `${path}: ${parsed.problem}`, path } : parsed
}
