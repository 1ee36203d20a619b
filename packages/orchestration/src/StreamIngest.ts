/**
 * Durable stream ingestion: a reactor handler that produces a stream of text for the effect it runs
 * (a model's deltas) writes it here, and it is recorded through the front door as internal
 * `effect.stream` commands (StreamChunks). The rule: a batch leaves the buffer only after its commit
 * is acknowledged. A flush the store refuses (a StorageFailure) is retried under the same id, so a
 * flush that did land is answered from its receipt, never recorded twice; while it is retried the
 * buffer fills and the producer waits (backpressure). When it cannot be recorded (retries spent, a
 * non-transient failure, the attempt gone stale) ingestion fails with StreamNotRecorded, which the
 * handler turns into its outcome (`toEffectFailure`: reason `storage` with the driver's code), so the
 * effect fails visibly instead of finishing with a truncated stream.
 *
 * Flushes happen when `flushBytes` are buffered or at the end of the `flushEvery` window in which
 * the first unflushed write came (so at most `flushEvery` after it), whichever comes first, one at a
 * time, in order. Windows are shared (FlushWindows): every stream of the process that has text
 * waiting flushes at the same instant, so their commands reach the processor together and commit in
 * one group commit (one fsync) instead of one transaction each. The producer never waits for a
 * flush, except when its buffer (or the budget) is full. Memory: a stream holds at most
 * `maxBufferedBytes` (UTF-8) plus the one write that is waiting for room; a write larger than the
 * buffer is taken alone once the buffer is empty. Streams given one `StreamBudget` hold at most its
 * `totalBytes` together (plus one waiting write each).
 *
 * Channels (StreamChunks): a write may name one (a tool call's arguments beside the answer); a
 * flush records each channel's run of writes as its own command, all of them sent at once (one group
 * commit) and answered in order, and each channel's offsets are counted here. No chunk ends between the two halves of a UTF-16
 * surrogate pair: a write ending in a high surrogate keeps it back for the channel's next write
 * (or the final `flush`), so every delta a reader gets is well-formed text; a surrogate that has no
 * other half is recorded as U+FFFD.
 */
import { Deferred, Duration, Effect, Either, Exit, Fiber, Schedule, Schema, type Scope, Stream } from "effect"
import { Engine } from "./Engine.js"
import { CommandRejected, type DispatchError, EngineUnavailable, StorageFailure } from "./Errors.js"
import type { OutboxRow } from "./Outbox.js"
import { FaultPoints } from "./FaultPoints.js"
import { EffectFailure } from "./EffectVerdicts.js"
import { chunkCommandId, type EffectStream } from "./StreamChunks.js"
import * as FlushWindows from "./FlushWindows.js"

export interface RetryOptions {
  /** Re-sends of one refused flush before ingestion fails. Default 10. */
  readonly maxRetries: number
  /** First wait; doubled per retry up to `cap`. Defaults 100 millis and 5 seconds (≈ 30 s in all). */
  readonly base: Duration.DurationInput
  readonly cap: Duration.DurationInput
}

export interface StreamIngestOptions {
  /** The row being performed: the chunks belong to its current attempt. */
  readonly effect: Pick<OutboxRow, "effectId" | "aggregateType" | "aggregateId" | "attempts"> & {
    /** The effect's kind, for fault points (`stream.after-flush:kind=…`). */
    readonly kind?: string
  }
  /** Flush at most this long after the first unflushed write. Default 50 millis. */
  readonly flushEvery?: Duration.DurationInput
  /** Flush once this many UTF-8 bytes are buffered. Default 4 KiB. */
  readonly flushBytes?: number
  /** The producer waits while this many bytes are buffered (in flight included). Default 64 KiB. */
  readonly maxBufferedBytes?: number
  readonly retry?: Partial<RetryOptions>
  /** A budget shared by many streams (`makeBudget`): their buffered bytes together stay within it. */
  readonly budget?: StreamBudget
}

/**
 * Bytes all the streams given it may hold buffered together: a write waits for room in the budget
 * as it waits for room in its own buffer, and a flush gives its bytes back once committed.
 */
export interface StreamBudget {
  readonly totalBytes: number
  readonly semaphore: Effect.Semaphore
}

export const makeBudget = (totalBytes: number): Effect.Effect<StreamBudget> =>
  Effect.map(Effect.makeSemaphore(Math.max(1, totalBytes)), (semaphore) => ({
    totalBytes: Math.max(1, totalBytes),
    semaphore
  }))

export const defaults = {
  flushEvery: Duration.millis(50),
  flushBytes: 4 * 1024,
  maxBufferedBytes: 64 * 1024,
  retry: { maxRetries: 10, base: Duration.millis(100), cap: Duration.seconds(5) } satisfies RetryOptions
} as const

/**
 * The stream could not be recorded, so the effect must fail:
 * - `storage`: the store refused the flush until retries ran out, or for good (`code`: the driver's);
 * - `stale`: the attempt moved on (lease lost, reclaimed, settled); its chunks are refused, as its
 *   outcome will be;
 * - `refused`: the engine refused the command otherwise (shutting down, a defect); `code` says how.
 */
export class StreamNotRecorded extends Schema.TaggedError<StreamNotRecorded>()("StreamNotRecorded", {
  effectId: Schema.String,
  attempt: Schema.Number,
  reason: Schema.Literal("storage", "stale", "refused"),
  code: Schema.String,
  message: Schema.String
}) {}

/** The handler's failure for a stream that could not be recorded; final, never retried blindly. */
export const toEffectFailure = (error: StreamNotRecorded): EffectFailure =>
  new EffectFailure({
    message: `stream of ${error.effectId}#${error.attempt} not recorded: ${error.message}`,
    retryable: false,
    code: error.code,
    reason: error.reason === "storage" ? "storage" : "handler"
  })

export interface StreamIngestStats {
  /** Bytes buffered, the flush in flight included. */
  readonly bufferedBytes: number
  /** Where the committed text of this attempt ends (UTF-16 code units). */
  readonly committedEnd: number
  /** Flushes committed (a duplicate answered from its receipt counts). */
  readonly flushes: number
}

export interface StreamIngest {
  /** Buffers text (of `channel`, default the main one); waits while the buffer is full; fails once the stream cannot be recorded. */
  readonly write: (text: string, channel?: string) => Effect.Effect<void, StreamNotRecorded>
  /** Flushes everything written (a held-back high surrogate included) and waits for its commit. */
  readonly flush: Effect.Effect<void, StreamNotRecorded>
  /** Resolves with the failure as soon as the stream cannot be recorded (never succeeds otherwise). */
  readonly failed: Effect.Effect<never, StreamNotRecorded>
  readonly stats: Effect.Effect<StreamIngestStats>
}

/** Transient refusals are re-sent under the same id; anything else ends ingestion. */
const isTransient = (error: DispatchError): boolean =>
  (error instanceof StorageFailure && error.reason !== "corrupt" && error.reason !== "constraint") ||
  (error instanceof EngineUnavailable && (error.reason === "overloaded" || error.reason === "storage-below-floor"))

const utf8Bytes = (text: string) => Buffer.byteLength(text, "utf8")

/** Why a chunk could not be recorded, as the stream's typed failure. */
const notRecorded = (effectId: string, attempt: number, error: DispatchError, start: number): StreamNotRecorded => {
  const base = { effectId, attempt }
  if (error instanceof StorageFailure) {
    return new StreamNotRecorded({
      ...base,
      reason: "storage",
      code: error.code,
      message: `the store refused chunk at ${start} (${error.reason}): ${error.message}`
    })
  }
  if (error instanceof CommandRejected && error.reason === "stale-stream") {
    return new StreamNotRecorded({ ...base, reason: "stale", code: "stream-stale", message: error.message })
  }
  return new StreamNotRecorded({
    ...base,
    reason: "refused",
    code: error instanceof CommandRejected ? error.reason : error._tag,
    message: error.message
  })
}

/**
 * A surrogate without its other half cannot be stored as UTF-8: SQLite keeps three U+FFFD for it,
 * and the chunk's offsets (one unit) would no longer match its text. It becomes one U+FFFD here.
 */
const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g
const wellFormed = (text: string): string => text.replace(loneSurrogate, "\ufffd")

/** Is the last code unit a high surrogate (the first half of a pair the next write completes)? */
const endsMidPair = (text: string): boolean => {
  const last = text.charCodeAt(text.length - 1)
  return last >= 0xd800 && last <= 0xdbff
}

/** An ingest for one attempt of one effect, with its flusher running in the caller's scope. */
export const make = (
  options: StreamIngestOptions
): Effect.Effect<StreamIngest, never, Engine | FlushWindows.FlushWindows | Scope.Scope> =>
  Effect.gen(function* () {
    const engine = yield* Engine
    const windows = yield* FlushWindows.FlushWindows
    const faults = yield* FaultPoints
    const { effectId, aggregateType, aggregateId, attempts: attempt } = options.effect
    const flushEvery = Math.max(1, Duration.toMillis(options.flushEvery ?? defaults.flushEvery))
    const flushBytes = Math.max(1, options.flushBytes ?? defaults.flushBytes)
    const maxBuffered = Math.max(flushBytes, options.maxBufferedBytes ?? defaults.maxBufferedBytes)
    const retry = { ...defaults.retry, ...options.retry }
    const schedule = Schedule.exponential(retry.base).pipe(
      Schedule.modifyDelay((delay) => Duration.min(delay, Duration.decode(retry.cap))),
      Schedule.intersect(Schedule.recurs(retry.maxRetries))
    )

    const budget = options.budget
    // Written only between yields, so the producer and the flusher never see half a change.
    const pending: Array<string> = []
    /** Budget permits each pending piece holds, given back when it commits (or the scope closes). */
    const held: Array<number> = []
    /** Each pending piece's UTF-8 size as counted when written. */
    const sizes: Array<number> = []
    /** Each pending piece's channel. */
    const channels: Array<string> = []
    /** Per channel: a high surrogate held back until the write that completes its pair. */
    const heldBack = new Map<string, string>()
    /** Per channel: where its committed text ends. */
    const channelEnds = new Map<string, number>()
    let pendingBytes = 0
    let committedEnd = 0
    let flushes = 0
    let failure: StreamNotRecorded | undefined
    const failedSignal = yield* Deferred.make<never, StreamNotRecorded>()
    const lock = yield* Effect.makeSemaphore(1)
    /**
     * What the flusher waits for, when it waits: a first write (`data`), or its window's end or
     * the flush size (`size`; the window's end completes `wake` through FlushWindows.join). One
     * Deferred a wait, completed by whichever comes first, instead of two fibers raced a window.
     */
    let waiting:
      | { readonly until: "data" | "size"; readonly wake: Deferred.Deferred<void>; ticket?: FlushWindows.Ticket }
      | undefined
    /** A write landed: wakes the flusher if it waits for data, or for the size now reached. */
    const ring = () => {
      if (waiting === undefined) return
      if (waiting.until === "size" && pendingBytes < flushBytes) return
      Deferred.unsafeDone(waiting.wake, Exit.void)
      // Woken early, it no longer waits in its window (whose ending streams may now go).
      waiting.ticket?.leave()
      waiting = undefined
    }
    /** Waits on `wake` unless `ready` already holds; the check and the wait's setup are one step, so no write falls between them. */
    const waitFor = (until: "data" | "size", ready: () => boolean) =>
      Effect.flatMap(Deferred.make<void>(), (wake) =>
        Effect.suspend(() => {
          if (ready()) return Effect.void
          const wait: NonNullable<typeof waiting> = { until, wake }
          waiting = wait
          const join =
            until === "size"
              ? Effect.map(windows.join(flushEvery, wake), (ticket) => {
                  // Rung while joining (the runtime may yield between two steps): it waits in no window.
                  if (waiting !== wait) return ticket.leave()
                  wait.ticket = ticket
                  if (ended) ticket.ending()
                })
              : Effect.void
          return Effect.zipRight(
            join,
            Effect.onInterrupt(Deferred.await(wake), () => Effect.sync(() => wait.ticket?.leave()))
          )
        })
      )

    /** The stream has ended (`flush`): each window wait of it is an ending one (FlushWindows.Ticket.ending). */
    let ended = false

    /**
     * The stream's end: its last text waits for the current window, which other streams' text
     * shares (FlushWindows opens it early, after one turn, when only ending streams are left in it),
     * so ends close together land in one commit instead of one transaction each. Every wait of this
     * stream in a window is then an ending one (its flusher's too, now or when it joins), so an end
     * never waits for itself.
     */
    const endWindow = Effect.suspend(() => {
      ended = true
      waiting?.ticket?.ending()
      return pending.length === 0 ? Effect.void : windows.windowEnd(flushEvery, true)
    })

    const fail = (error: StreamNotRecorded) =>
      Effect.suspend(() => {
        failure ??= error
        return Deferred.fail(failedSignal, failure).pipe(Effect.zipRight(Effect.fail(failure)))
      })

    /** One channel's run of consecutive writes at the front of the buffer, as one command. */
    interface Run {
      readonly count: number
      readonly channel: string
      readonly text: string
      readonly start: number
      readonly channelStart: number
    }

    /** The buffer's runs, in order, each starting where the one before it ends (offsets contiguous). */
    const planRuns = (): Array<Run> => {
      const runs: Array<Run> = []
      const ends = new Map(channelEnds)
      let start = committedEnd
      for (let at = 0; at < pending.length; ) {
        const channel = channels[at]!
        let count = 1
        while (at + count < pending.length && channels[at + count] === channel) count++
        const text = pending.slice(at, at + count).join("")
        const channelStart = ends.get(channel) ?? 0
        runs.push({ count, channel, text, start, channelStart })
        ends.set(channel, channelStart + text.length)
        start += text.length
        at += count
      }
      return runs
    }

    const send = (run: Run) => {
      const command: EffectStream = {
        type: "effect.stream",
        commandId: chunkCommandId(effectId, attempt, run.start, run.start + run.text.length),
        effectId,
        aggregateType,
        aggregateId,
        attempt,
        start: run.start,
        text: run.text,
        // The main text of a one-channel attempt carries neither (its commands are as before channels).
        ...(run.channel === "" ? {} : { channel: run.channel }),
        ...(run.channelStart === run.start ? {} : { channelStart: run.channelStart })
      }
      return engine.dispatchWithReceipt(command, { origin: "internal" })
    }

    /** A committed run leaves the buffer (it is at its front: runs land in order). */
    const landed = (run: Run) =>
      Effect.suspend(() => {
        pending.splice(0, run.count)
        channels.splice(0, run.count)
        channelEnds.set(run.channel, run.channelStart + run.text.length)
        const permits = held.splice(0, run.count).reduce((a, b) => a + b, 0)
        pendingBytes -= sizes.splice(0, run.count).reduce((a, b) => a + b, 0)
        committedEnd = run.start + run.text.length
        flushes++
        const released = budget === undefined || permits === 0 ? Effect.void : budget.semaphore.release(permits)
        return Effect.zipRight(
          released,
          faults.hit("stream.after-flush", options.effect.kind === undefined ? {} : { kind: options.effect.kind })
        )
      })

    /**
     * Was a run decided before the run it follows had landed? Only a later run of a flush whose
     * earlier run the store refused; the engine stores no answer for it (StreamChunks), so it is
     * sent again, under its id, once the runs before it landed.
     */
    const aheadOfEarlierRun = (error: DispatchError, index: number) =>
      index > 0 && error instanceof CommandRejected && error.reason === "stream-out-of-order"

    /**
     * One round of `flushBuffered`: the runs buffered now. Answers not taken (a run failed) end with
     * its scope. One run (one channel, the common case) is sent without a fiber of its own.
     */
    const round = (runs: ReadonlyArray<Run>) =>
      Effect.gen(function* () {
        const answers =
          runs.length === 1
            ? [Effect.either(send(runs[0]!))]
            : (yield* Effect.forEach(runs, (run) => Effect.forkScoped(Effect.either(send(run))))).map(Fiber.join)
        for (const [index, run] of runs.entries()) {
          const answer = yield* answers[index]!
          if (Either.isRight(answer)) {
            yield* landed(run)
            continue
          }
          if (!isTransient(answer.left) && !aheadOfEarlierRun(answer.left, index)) {
            return yield* fail(notRecorded(effectId, attempt, answer.left, run.start))
          }
          // A refused run's answer was its first try (the retries wait as for any refusal); a run
          // found ahead is sent again at once.
          let first: DispatchError | undefined = isTransient(answer.left) ? answer.left : undefined
          const again = Effect.suspend(() => {
            const refused = first
            first = undefined
            return refused === undefined ? send(run) : Effect.fail(refused)
          })
          yield* again.pipe(
            Effect.retry({ schedule, while: isTransient }),
            Effect.matchEffect({
              onFailure: (error) => fail(notRecorded(effectId, attempt, error, run.start)),
              onSuccess: () => landed(run)
            })
          )
        }
      })

    /**
     * Sends everything buffered: every channel's run at once, so a window's text and tool-call
     * arguments reach the processor together and share one group commit, then takes their answers
     * in order. A run leaves the buffer only once its commit is answered; one the store refused is
     * re-sent under its id (after the runs before it landed), and so is a later run the engine found
     * ahead of it. Writes made meanwhile wait for the next round.
     */
    const flushBuffered: Effect.Effect<void, StreamNotRecorded> = lock
      .withPermits(1)(
        Effect.gen(function* () {
          while (pending.length > 0 && failure === undefined) {
            yield* Effect.scoped(round(planRuns()))
          }
          if (failure !== undefined) return yield* failure
        })
      )
      .pipe(
        // A defect while sending (a bug, not a refused write) ends `failed` too: the background
        // flusher's fiber would otherwise die unseen, and a producer racing `failed` would write until
        // the buffer filled and then wait forever.
        Effect.tapDefect((cause) => Deferred.failCause(failedSignal, cause))
      )

    const flusher = Effect.gen(function* () {
      while (true) {
        // Writes during a flush find the buffer non-empty: go on without waiting.
        yield* waitFor("data", () => pending.length > 0)
        yield* waitFor("size", () => pendingBytes >= flushBytes)
        waiting = undefined
        yield* flushBuffered
      }
    })
    if (budget !== undefined) {
      // What never committed gives its share of the budget back when the stream's scope ends.
      yield* Effect.addFinalizer(() =>
        Effect.suspend(() => {
          const permits = held.splice(0).reduce((a, b) => a + b, 0)
          return permits === 0 ? Effect.void : budget.semaphore.release(permits)
        })
      )
    }
    // swallow-ok: a failed flush is kept in `failure` (and `failed`); every later write and flush fails with it.
    yield* Effect.forkScoped(Effect.catchAll(flusher, () => Effect.void))

    /** Takes a piece into the buffer (synchronously) and wakes the flusher if it waits for it. */
    const append = (text: string, channel: string, permits: number, bytes: number) => {
      pending.push(text)
      channels.push(channel)
      held.push(permits)
      sizes.push(bytes)
      pendingBytes += bytes
      ring()
    }

    /** Buffers `text` as it is (no pair held back). */
    const buffer = (text: string, channel: string): Effect.Effect<void, StreamNotRecorded> =>
      Effect.suspend(() => {
        if (failure !== undefined) return Effect.fail(failure)
        if (text.length === 0) return Effect.void
        const bytes = utf8Bytes(text)
        const full = pendingBytes > 0 && pendingBytes + bytes > maxBuffered
        // The common write (room in the buffer, no shared budget) is taken in this one step.
        if (!full && budget === undefined) {
          append(text, channel, 0, bytes)
          return Effect.void
        }
        // Full: wait for the flush in flight, then send the rest ourselves; the producer is slowed.
        const room = full ? flushBuffered : Effect.void
        // A write larger than the whole budget takes all of it (it waits until every other stream's is back).
        const permits = budget === undefined ? 0 : Math.min(bytes, budget.totalBytes)
        const share = budget === undefined ? Effect.void : budget.semaphore.take(permits)
        // Permits taken are recorded at once (an interruption in between would leak them).
        return Effect.zipRight(
          room,
          Effect.uninterruptibleMask((restore) =>
            Effect.zipRight(
              restore(share),
              Effect.sync(() => append(text, channel, permits, bytes))
            )
          )
        )
      })

    const write = (written: string, channel = ""): Effect.Effect<void, StreamNotRecorded> =>
      Effect.suspend(() => {
        let text = (heldBack.get(channel) ?? "") + written
        heldBack.delete(channel)
        if (endsMidPair(text)) {
          heldBack.set(channel, text.slice(-1))
          text = text.slice(0, -1)
        }
        return buffer(wellFormed(text), channel)
      })

    /** The held-back halves are what the producer sent last: the end of the stream records them as they are. */
    const releaseHeldBack = Effect.suspend(() => {
      const halves = [...heldBack]
      heldBack.clear()
      return Effect.forEach(halves, ([channel, half]) => buffer(wellFormed(half), channel), { discard: true })
    })

    return {
      write,
      // After the commit, one yield: the readers it rang run before the caller goes on (to its
      // effect's settlement, a transaction of its own ahead of them otherwise).
      flush: Effect.zipRight(
        releaseHeldBack,
        Effect.zipRight(endWindow, Effect.zipLeft(flushBuffered, Effect.yieldNow()))
      ),
      failed: Deferred.await(failedSignal),
      stats: Effect.sync(() => ({ bufferedBytes: pendingBytes, committedEnd, flushes }))
    } satisfies StreamIngest
  })

/**
 * Records a producer's whole stream: every piece is written, the rest flushed at its end. Fails as
 * soon as the stream cannot be recorded (the producer is interrupted), or with the producer's own
 * error (what was produced before it stays recorded). Answers where the recorded text ends.
 */
export const run = <E, R>(
  options: StreamIngestOptions,
  producer: Stream.Stream<string, E, R>
): Effect.Effect<StreamIngestStats, E | StreamNotRecorded, Engine | FlushWindows.FlushWindows | R> =>
  Effect.scoped(
    Effect.gen(function* () {
      const ingest = yield* make(options)
      yield* Effect.raceFirst(Stream.runForEach(producer, ingest.write), ingest.failed)
      yield* ingest.flush
      return yield* ingest.stats
    })
  )
