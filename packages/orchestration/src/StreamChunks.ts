/**
 * Stream chunks: what a running effect produced as it went (a model's text deltas), recorded through
 * the front door. The `effect_stream_chunks` table is owned here (its columns, every statement), with
 * the internal command that appends to it (`effect.stream`, reserved: clients cannot send it) and the
 * pure rule that checks one against the effect's outbox row: like a settlement, a chunk of an attempt
 * the row has moved past (a lost lease, a reclaim, a settle) is stale and writes nothing. Chunks of
 * one attempt are contiguous: each starts where the last committed one ended, so a reader holds the
 * exact text, and a duplicate (same id) is answered from its receipt before this rule runs.
 *
 * Offsets count UTF-16 code units of the attempt's text (JavaScript string length), so
 * `text.slice(start, end)` of the concatenation is the chunk. The final result stays in the effect's
 * outcome; `compactSettled` deletes the chunks of settled effects.
 *
 * Channels: one attempt may stream several texts side by side (a model's answer and the arguments
 * of each tool call it makes). Every chunk names its channel (`""`, the default, is the main text)
 * and where it starts within that channel (`channelStart`); `start`/`end` stay the attempt's one
 * order across all its channels, so contiguity, ids and a reader's resume position are unchanged,
 * and a channel's text is the concatenation of its chunks in that order. The attempt has a single
 * writer (its performer), which counts each channel's offsets; the rule here checks the attempt's.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect, Schema } from "effect"
import { Decision, type AnyAggregate, type Rejection } from "./Aggregate.js"
import { ingestCommandId } from "./Ingestion.js"
import type { OutboxRow } from "./Outbox.js"
import * as Outbox from "./Outbox.js"
import type { Decide } from "./Processor.js"
import { CommandDefect, CommandRejected } from "./Errors.js"
import type * as Receipts from "./Receipts.js"

/** The internal command: append `text` at `start` to the stream of attempt `attempt` of an effect. */
export const EffectStream = Schema.Struct({
  type: Schema.Literal("effect.stream"),
  commandId: Schema.String,
  effectId: Schema.String,
  aggregateType: Schema.String,
  aggregateId: Schema.String,
  attempt: Schema.Number,
  start: Schema.Number,
  text: Schema.String.pipe(Schema.minLength(1)),
  /** The channel of this text (absent: the main one, `""`). */
  channel: Schema.optional(Schema.String),
  /** Where the text starts within its channel (absent: at `start`, as when the attempt has one channel). */
  channelStart: Schema.optional(Schema.Number)
})
export type EffectStream = typeof EffectStream.Type

const streamKeys = new Set([
  "type",
  "commandId",
  "effectId",
  "aggregateType",
  "aggregateId",
  "attempt",
  "start",
  "text",
  "channel",
  "channelStart"
])

/**
 * The engine's own flushes arrive here twenty times a second per stream: a plain check of the
 * object gives the decoded command without the Schema decoder's walk. It accepts exactly what
 * `EffectStream` accepts (no other key, the types, text not empty); anything else answers
 * undefined, and the router decodes that value with the schema to say what is wrong.
 */
export const decodeStreamQuickly = (raw: Record<string, unknown>): EffectStream | undefined => {
  for (const key in raw) if (!streamKeys.has(key)) return undefined
  const { commandId, effectId, aggregateType, aggregateId, attempt, start, text, channel, channelStart } = raw
  if (
    raw.type !== "effect.stream" ||
    typeof commandId !== "string" ||
    typeof effectId !== "string" ||
    typeof aggregateType !== "string" ||
    typeof aggregateId !== "string" ||
    typeof attempt !== "number" ||
    typeof start !== "number" ||
    typeof text !== "string" ||
    text.length === 0 ||
    ("channel" in raw && typeof channel !== "string") ||
    ("channelStart" in raw && typeof channelStart !== "number")
  ) {
    return undefined
  }
  return raw as unknown as EffectStream
}

/**
 * A 64-bit digest of a chunk's text over its UTF-16 code units, 16 hex digits: two 32-bit lanes in
 * one pass, FNV-1a and a multiply-xorshift lane (murmur2's multiplier, another basis) whose shift
 * folds high bits down, so the two do not collide together where FNV-1a does (its low bits see only
 * the code units' low bits). With 32 bits alone two texts of one length could collide, and a
 * conflicting re-send under one id was answered as a duplicate. It runs per flush, on the streaming
 * path: a few integer operations per code unit, no BigInt.
 */
export const textDigest = (text: string): string => {
  let fnv = 0x811c9dc5
  let mix = 0x9747b28c
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i)
    fnv = Math.imul(fnv ^ unit, 0x01000193)
    mix = Math.imul(mix ^ unit, 0x5bd1e995)
    mix ^= mix >>> 15
  }
  return (fnv >>> 0).toString(16).padStart(8, "0") + (mix >>> 0).toString(16).padStart(8, "0")
}

/**
 * The fingerprint of a chunk command, for its receipt: every field but the id, the text as its
 * length and digest, the channel fields as they are read (absent: the main channel, starting at
 * `start`), so naming them where they are implied is the same command. The id (`chunkCommandId`)
 * already names the effect, attempt and range, so a re-sent flush matches; another text or channel
 * under one id is still a conflict. Cheaper than the canonical-JSON SHA-256 of other commands (a
 * chunk is the engine's own, sent per window).
 */
export const chunkFingerprint = (command: EffectStream): string =>
  `stream:${command.effectId}#${command.attempt}:${command.start}+${command.text.length}:${textDigest(command.text)}:` +
  `${command.aggregateType}:${command.aggregateId}:${command.channel ?? ""}:${command.channelStart ?? command.start}`

/**
 * The id of a flush: `ingest:stream:<effectId>#<attempt>:<start>-<end>` (hashed when too long).
 * A re-sent flush of the same range is the same command, answered from its receipt.
 */
export const chunkCommandId = (effectId: string, attempt: number, start: number, end: number): string =>
  ingestCommandId("stream", `${effectId}#${attempt}:${start}-${end}`)

/** A piece of one attempt's stream: where it sits in the attempt, and in its channel. */
export interface ChunkPiece {
  readonly effectId: string
  readonly attempt: number
  readonly start: number
  readonly end: number
  readonly text: string
  /** `""`: the main text; otherwise the channel the writer named (a tool call's id). */
  readonly channel: string
  /** Where `text` starts within its channel. */
  readonly channelStart: number
}

/** What the owning aggregate is told (its optional `onStream`), so a domain can project it. */
export interface StreamChunkNotice extends ChunkPiece {
  readonly kind: string
}

/** A stored piece, with the flush command that wrote it. */
export interface StreamChunk extends ChunkPiece {
  readonly commandId: string
  readonly committedAt: number
}

export type ChunkVerdict =
  | { readonly _tag: "Stale"; readonly message: string }
  | { readonly _tag: "OutOfOrder"; readonly message: string }
  | { readonly _tag: "Append"; readonly notice: StreamChunkNotice }

/**
 * Pure: may this chunk be appended? Only to a running row at the chunk's attempt, of the aggregate
 * the command names, exactly at the end of what that attempt has recorded (`recordedEnd`). One
 * exception: a row cancelled at that attempt whose performer has not yet said it stopped (it keeps
 * the lease until then, CancelWatch) still takes its chunks: they are the text it produced before
 * the stop reached it, flushed as it stops, so the partial text kept is all of it.
 */
/**
 * Until when a cancelled row's performer may still flush what it had as it stops: the end of its
 * live lease (a cancelled row's lease is not renewed), or undefined when it is not stopping. The
 * table takes chunks (decideChunk) and followers wait for them (ReadSide) by this one rule, so a
 * follower never ends before a chunk the table would still take.
 */
export const stoppingUntil = (
  row: Pick<OutboxRow, "status"> & Partial<Pick<OutboxRow, "leaseOwner" | "leaseExpiresAt">>,
  now: number
): number | undefined =>
  row.status === "cancelled" &&
  row.leaseOwner !== undefined &&
  row.leaseOwner !== null &&
  row.leaseExpiresAt !== undefined &&
  row.leaseExpiresAt !== null &&
  row.leaseExpiresAt > now
    ? row.leaseExpiresAt
    : undefined

export const decideChunk = (
  row:
    | (Pick<OutboxRow, "effectId" | "kind" | "aggregateType" | "aggregateId" | "status" | "attempts"> &
        Partial<Pick<OutboxRow, "leaseOwner" | "leaseExpiresAt">>)
    | undefined,
  command: Pick<
    EffectStream,
    "effectId" | "aggregateType" | "aggregateId" | "attempt" | "start" | "text" | "channel" | "channelStart"
  >,
  recordedEnd: number,
  now: number
): ChunkVerdict => {
  if (row === undefined) return { _tag: "Stale", message: `no effect '${command.effectId}' exists` }
  if (row.aggregateType !== command.aggregateType || row.aggregateId !== command.aggregateId) {
    return {
      _tag: "Stale",
      message: `effect '${command.effectId}' belongs to ${row.aggregateType} '${row.aggregateId}'`
    }
  }
  const stopping = stoppingUntil(row, now) !== undefined
  if ((row.status !== "running" && !stopping) || row.attempts !== command.attempt) {
    return {
      _tag: "Stale",
      message: `effect '${command.effectId}' is ${row.status} at attempt ${row.attempts}; this chunk is of attempt ${command.attempt}`
    }
  }
  if (command.start !== recordedEnd) {
    return {
      _tag: "OutOfOrder",
      message: `attempt ${command.attempt} of effect '${command.effectId}' has recorded up to ${recordedEnd}; this chunk starts at ${command.start}`
    }
  }
  return {
    _tag: "Append",
    notice: {
      effectId: row.effectId,
      kind: row.kind,
      attempt: command.attempt,
      start: command.start,
      end: command.start + command.text.length,
      text: command.text,
      channel: command.channel ?? "",
      channelStart: command.channelStart ?? command.start
    }
  }
}

/** The table (migration 0006_stream_chunks). */
export const createTable = Effect.gen(function* () {
  const sql = yield* SqlClient
  const int = sql.onDialectOrElse({ pg: () => "BIGINT", orElse: () => "INTEGER" })
  yield* sql.unsafe(`CREATE TABLE effect_stream_chunks (
    effect_id TEXT NOT NULL,
    attempt ${int} NOT NULL,
    start_offset ${int} NOT NULL,
    end_offset ${int} NOT NULL,
    text TEXT NOT NULL,
    command_id TEXT NOT NULL,
    committed_at ${int} NOT NULL,
    PRIMARY KEY (effect_id, attempt, start_offset)
  )`)
})

/** Channels (migration 0007_stream_channels): rows written before it are all main text at their offset. */
export const addChannels = Effect.gen(function* () {
  const sql = yield* SqlClient
  const int = sql.onDialectOrElse({ pg: () => "BIGINT", orElse: () => "INTEGER" })
  yield* sql.unsafe(`ALTER TABLE effect_stream_chunks ADD COLUMN channel TEXT NOT NULL DEFAULT ''`)
  yield* sql.unsafe(`ALTER TABLE effect_stream_chunks ADD COLUMN channel_start ${int}`)
})

/** The columns, in the migrated order (test/table-columns.test.ts holds the two together). */
export const columns = [
  "effect_id",
  "attempt",
  "start_offset",
  "end_offset",
  "text",
  "command_id",
  "committed_at",
  "channel",
  "channel_start"
] as const

interface RawChunk {
  readonly effect_id: string
  readonly attempt: number | string
  readonly start_offset: number | string
  readonly end_offset: number | string
  readonly text: string
  readonly command_id: string
  readonly committed_at: number | string
  readonly channel: string | null
  readonly channel_start: number | string | null
}

const toChunk = (r: RawChunk): StreamChunk => ({
  effectId: r.effect_id,
  attempt: Number(r.attempt),
  start: Number(r.start_offset),
  end: Number(r.end_offset),
  text: r.text,
  commandId: r.command_id,
  committedAt: Number(r.committed_at),
  channel: r.channel ?? "",
  channelStart: Number(r.channel_start ?? r.start_offset)
})

/**
 * Where the attempt's recorded text ends (0 when it has none): the end of its last chunk, found by
 * the primary key (chunks are contiguous, so the last to start ends last). `MAX(end_offset)` read
 * every chunk of the attempt, once per chunk: quadratic over a long answer.
 */
export const recordedEnd = (effectId: string, attempt: number): Effect.Effect<number, SqlError, SqlClient> =>
  Effect.flatMap(
    SqlClient,
    (sql) => sql<{ end_offset: number | string }>`SELECT end_offset FROM effect_stream_chunks
      WHERE effect_id = ${effectId} AND attempt = ${attempt} ORDER BY start_offset DESC LIMIT 1`
  ).pipe(Effect.map((rows) => Number(rows[0]?.end_offset ?? 0)))

const append = (chunk: StreamChunk) =>
  Effect.flatMap(
    SqlClient,
    (sql) => sql`INSERT INTO effect_stream_chunks (${sql.literal(columns.join(", "))})
      VALUES (${chunk.effectId}, ${chunk.attempt}, ${chunk.start}, ${chunk.end}, ${chunk.text}, ${chunk.commandId}, ${chunk.committedAt}, ${chunk.channel}, ${chunk.channelStart})`
  )

export interface ReadChunksOptions {
  /** Only chunks after this position: a later attempt, or the same attempt from this offset on. */
  readonly after?: { readonly attempt: number; readonly end: number }
  /** Default 500, at most 10,000. */
  readonly limit?: number
}

/** A read's page size: `limit` within 1..10,000, 500 when not given. */
export const pageLimit = (limit: number | undefined): number => Math.min(Math.max(limit ?? 500, 1), 10_000)

/** The effect's chunks, all attempts, ordered by attempt then offset. */
export const read = (
  effectId: string,
  options: ReadChunksOptions = {}
): Effect.Effect<ReadonlyArray<StreamChunk>, SqlError, SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const limit = pageLimit(options.limit)
    const after = options.after ?? { attempt: 0, end: 0 }
    const rows = yield* sql<RawChunk>`SELECT * FROM effect_stream_chunks WHERE effect_id = ${effectId}
      AND (attempt > ${after.attempt} OR (attempt = ${after.attempt} AND start_offset >= ${after.end}))
      ORDER BY attempt, start_offset LIMIT ${limit}`
    return rows.map(toChunk)
  })

/**
 * Deletes the chunks of settled effects (succeeded, failed, cancelled), at most `batchSize` effects
 * per call; returns the effect id of each chunk that went (so its length is how many went). A running or pending effect keeps its chunks. With
 * `settledBefore`, only effects settled (last updated) before it; an effect whose outbox row was
 * pruned already (Retention) counts as settled long ago: its chunks go.
 */
export const compactSettled = (
  batchSize = 500,
  settledBefore?: number,
  now?: number
): Effect.Effect<ReadonlyArray<string>, SqlError, SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const before = settledBefore ?? Number.MAX_SAFE_INTEGER
    const at = now ?? (yield* Clock.currentTimeMillis)
    // Not a cancelled effect whose performer still holds a live lease: it is stopping, and may still
    // flush its text (decideChunk takes it), which would then be refused as out of order for good.
    const deleted = yield* sql<{ effect_id: string }>`DELETE FROM effect_stream_chunks WHERE effect_id IN (
        SELECT DISTINCT c.effect_id FROM effect_stream_chunks c LEFT JOIN outbox o ON o.effect_id = c.effect_id
        WHERE o.effect_id IS NULL OR (o.status IN ('succeeded', 'failed', 'cancelled') AND o.updated_at < ${before}
          AND NOT (o.status = 'cancelled' AND o.lease_owner IS NOT NULL AND o.lease_expires_at > ${at}))
        LIMIT ${batchSize}
      ) RETURNING effect_id`
    return deleted.map((row) => row.effect_id)
  })

/**
 * Whether a chunk of this aggregate reads its effect's row through the batch's SettlementPage (read
 * with the other settlements' and chunks' rows of its run, in one query) instead of alone. Only when
 * the aggregate projects no chunk: then the chunk writes nothing but its row in the chunks table and
 * its receipt, never an outbox row, so the page need not be written before it.
 */
export const readsThroughPage = (aggregate: AnyAggregate): boolean => aggregate.onStream === undefined

/**
 * The decision of a chunk command: check it against the row and what its attempt recorded, append
 * it, and tell the owning aggregate (`onStream`) so a domain may project it. A stale chunk is
 * rejected for good (its rejection stored under its id). An out-of-order one is refused for now and
 * stores nothing, not even its receipt: a writer sends a window's chunks together (StreamIngest),
 * and one decided before the chunk it follows landed (that one refused by the store, re-sent) is
 * sent again under its id once it has.
 */
export const decideStreamCommand =
  (aggregate: AnyAggregate, identity: Receipts.CommandIdentity, command: EffectStream): Decide =>
  (state, ctx, page, appended) =>
    Effect.gen(function* () {
      const row = readsThroughPage(aggregate)
        ? yield* page.find(command.effectId)
        : yield* Outbox.findForDecision(command.effectId)
      const end = row === undefined ? 0 : yield* recordedEnd(command.effectId, command.attempt)
      const verdict = decideChunk(row, command, end, ctx.now)
      if (verdict._tag === "Stale") return Decision.reject("stale-stream", verdict.message)
      if (verdict._tag === "OutOfOrder") {
        return new CommandRejected({
          commandId: identity.commandId,
          aggregateType: identity.aggregateType,
          aggregateId: identity.aggregateId,
          reason: "stream-out-of-order",
          message: verdict.message,
          duplicate: false
        })
      }
      let decision: Decision<any> | Rejection = Decision.none()
      if (aggregate.onStream !== undefined) {
        decision = yield* Effect.try({
          try: () => aggregate.onStream!(state, verdict.notice, ctx),
          catch: (error) =>
            new CommandDefect({
              commandId: identity.commandId,
              aggregateType: identity.aggregateType,
              aggregateId: identity.aggregateId,
              stage: "decide",
              message: `onStream threw for ${identity.aggregateType} '${identity.aggregateId}': ${
                error instanceof Error ? error.message : String(error)
              }`
            })
        })
      }
      // The aggregate may refuse to project a chunk; the chunk is the engine's record and still lands.
      if (decision._tag === "Rejection") decision = Decision.none()
      const chunk: StreamChunk = {
        effectId: command.effectId,
        attempt: command.attempt,
        start: verdict.notice.start,
        end: verdict.notice.end,
        text: command.text,
        commandId: identity.commandId,
        committedAt: ctx.now,
        channel: verdict.notice.channel,
        channelStart: verdict.notice.channelStart
      }
      yield* append(chunk)
      appended.push(chunk)
      return decision
    })
