/**
 * The tails of the streams this process writes: the newest committed chunks of each live attempt,
 * kept in memory once their transaction has committed, so that a thread's readers (ThreadStream,
 * woken by every chunk commit of their aggregate, twenty times a second per stream) are answered
 * without reading the table again. At 64 streams a reader's wake-up was the largest share of the
 * work per token, and its read half of that (docs/benchmarks.md, "Streaming ingestion").
 *
 * What a tail claims, and why it holds: for attempt `attempt` of an effect, every committed chunk
 * that starts at or after `from` is in `chunks`, in order and contiguous, and no chunk of a later
 * attempt exists. Only where this process is the one writer of the store (a SQLite file it holds
 * locked, SqliteStoreLock): every chunk then commits through this process's processor, which hands
 * it here after COMMIT (never before: a rolled-back chunk is never seen), and a later attempt's
 * first chunk replaces the tail. A read the tail cannot answer exactly (another attempt, or a position
 * before `from`) is undefined: the caller reads the table. On PostgreSQL other
 * processes write chunks too, so there is no tail and every read goes to the table.
 *
 * Chunks leave with their rows: `forget` runs when an effect settles and when compaction deletes
 * an effect's chunks (Retention), so a tail never answers with text the table no longer holds.
 * Memory is bounded: a tail keeps its newest `chunksPerTail` chunks (a reader further behind reads
 * the table), and all tails together at most `totalUnits` UTF-16 code units of text, the least
 * recently written tails going first.
 */
import { Context, Effect, Layer, Option } from "effect"
import type { StreamChunk } from "./StreamChunks.js"
import { SqliteStoreLock } from "./storage/SqliteStore.js"

export interface StreamTailsShape {
  /** After COMMIT: the chunks the transaction appended, in commit order. */
  readonly committed: (chunks: ReadonlyArray<StreamChunk>) => void
  /** These effects' chunks are settled or gone from the table: their tails go. */
  readonly forget: (effectIds: Iterable<string>) => void
  /**
   * What `StreamChunks.read(effectId, { after, limit })` would answer now, or undefined when the
   * tail cannot say (the caller reads the table).
   */
  readonly read: (
    effectId: string,
    after: { readonly attempt: number; readonly end: number },
    limit: number
  ) => ReadonlyArray<StreamChunk> | undefined
}

export class StreamTails extends Context.Tag("orchestration/StreamTails")<StreamTails, StreamTailsShape>() {}

export const defaults = { chunksPerTail: 64, totalUnits: 8 * 1024 * 1024 } as const

interface Tail {
  readonly attempt: number
  /** Every committed chunk of the attempt that starts here or later is in `chunks`. */
  from: number
  readonly chunks: Array<StreamChunk>
  /** Text held, UTF-16 code units. */
  units: number
}

/** Tails kept in memory (the one-writer case). */
export const make = (limits: { readonly chunksPerTail: number; readonly totalUnits: number } = defaults) => {
  /** By effect id; a Map keeps insertion order, so the first entry is the least recently written. */
  const tails = new Map<string, Tail>()
  let units = 0

  const drop = (effectId: string) => {
    const tail = tails.get(effectId)
    if (tail === undefined) return
    units -= tail.units
    tails.delete(effectId)
  }

  const append = (chunk: StreamChunk) => {
    let tail = tails.get(chunk.effectId)
    const end = tail?.chunks.at(-1)?.end ?? tail?.from
    if (tail === undefined || tail.attempt !== chunk.attempt || end !== chunk.start) {
      // A new attempt (or, never expected, a gap): the tail starts again at this chunk.
      drop(chunk.effectId)
      tail = { attempt: chunk.attempt, from: chunk.start, chunks: [], units: 0 }
    } else {
      // Written again: it becomes the most recent entry.
      tails.delete(chunk.effectId)
    }
    tails.set(chunk.effectId, tail)
    tail.chunks.push(chunk)
    tail.units += chunk.text.length
    units += chunk.text.length
    if (tail.chunks.length > limits.chunksPerTail) {
      const first = tail.chunks.shift()!
      tail.units -= first.text.length
      units -= first.text.length
      tail.from = first.end
    }
    while (units > limits.totalUnits && tails.size > 0) drop(tails.keys().next().value!)
  }

  return StreamTails.of({
    committed: (chunks) => {
      for (const chunk of chunks) append(chunk)
    },
    forget: (effectIds) => {
      for (const effectId of effectIds) drop(effectId)
    },
    read: (effectId, after, limit) => {
      const tail = tails.get(effectId)
      if (tail === undefined || tail.attempt !== after.attempt || after.end < tail.from) return undefined
      const out: Array<StreamChunk> = []
      for (const chunk of tail.chunks) {
        if (out.length >= limit) break
        if (chunk.start >= after.end) out.push(chunk)
      }
      return out
    }
  })
}

/** No tails: every read goes to the table (a shared store, or a client another process may also write). */
export const none: StreamTailsShape = StreamTails.of({
  committed: () => {},
  forget: () => {},
  read: () => undefined
})

/** Tails where this process holds the store's lock (SqliteStoreLock), none elsewhere. */
export const layer: Layer.Layer<StreamTails> = Layer.effect(
  StreamTails,
  Effect.map(Effect.serviceOption(SqliteStoreLock), (lock) => (Option.isSome(lock) ? make() : none))
)
