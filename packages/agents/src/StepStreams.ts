/**
 * Which turn and step a stream belongs to. A model step's chunks (the engine's StreamChunks, keyed
 * by effect id and attempt) are its text as it streamed; this module says whose they are and how
 * each attempt ended, so a reader can show a growing answer, a superseded attempt (its process died,
 * the step ran again from offset 0) or an interrupted one. The mapping is read from the step's
 * outbox row (payload `{ threadId, turnId, step }`), which outlives its chunks: retention deletes
 * chunks with or before their row. The transcript holds only the final response, never the chunks.
 *
 * Channels: the answer's text is the main channel (`""`); the arguments of each tool call the step
 * makes stream in channel `tool:<callId>`, so a call's deltas concatenate to its arguments' JSON.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { StoredJson } from "@orchestration/engine"

const toolPrefix = "tool:"

/** The stream channel of a tool call's argument deltas. */
export const toolChannel = (callId: string): string => `${toolPrefix}${callId}`

/** The tool call whose arguments a channel carries; undefined for the main text (or another channel). */
export const toolCallOfChannel = (channel: string): string | undefined =>
  channel.startsWith(toolPrefix) ? channel.slice(toolPrefix.length) : undefined

/** Pure: one channel's text from an attempt's chunks (in their order). */
export const channelText = (
  chunks: ReadonlyArray<{ readonly attempt: number; readonly channel: string; readonly text: string }>,
  attempt: number,
  channel = ""
): string =>
  chunks
    .filter((c) => c.attempt === attempt && c.channel === channel)
    .map((c) => c.text)
    .join("")

export interface StepStream {
  /** The step's effect id (`stepEffectId(turnId, step)`): the key of its chunks. */
  readonly effectId: string
  readonly threadId: string
  readonly turnId: string
  /** 1-based step number within the turn. */
  readonly step: number
  /** The effect row's status: pending, running, succeeded, failed, cancelled. */
  readonly status: string
  /** The row's current attempt (1 once first claimed); chunks of lower attempts are superseded. */
  readonly attempts: number
  /** The row's outbox sequence: steps of a thread in the order they were planned. */
  readonly sequence: number
}

/**
 * What the chunks of one attempt show:
 * - `streaming`: the attempt runs now; more may come;
 * - `completed`: the step answered; its final text is in the transcript;
 * - `superseded`: the step ran (or will run) again as a later attempt, from offset 0;
 * - `interrupted`: the step was cancelled (turn.interrupt, thread delete) while streaming;
 * - `failed`: the step failed for good; its turn ended failed.
 */
export type AttemptState = "streaming" | "completed" | "superseded" | "interrupted" | "failed"

/** Pure: the state of `attempt`'s chunks given its step's row now. */
export const attemptState = (step: Pick<StepStream, "status" | "attempts">, attempt: number): AttemptState => {
  if (attempt < step.attempts) return "superseded"
  switch (step.status) {
    case "running":
      return "streaming"
    case "succeeded":
      return "completed"
    case "cancelled":
      return "interrupted"
    case "failed":
      return "failed"
    default:
      // Pending at this attempt: it was handed back (process loss, retry) and runs again as the next one.
      return "superseded"
  }
}

interface Row {
  readonly effect_id: string
  readonly aggregate_id: string
  readonly payload: string
  readonly status: string
  readonly attempts: number | string
  readonly sequence: number | string
}

/** A row whose stored payload is not JSON (Outbox.toRow fails it for good) lists without turn and step. */
const readPayload = (text: string): { turnId?: unknown; step?: unknown } => {
  const read = StoredJson.read(text, "payload")
  return read.ok ? ((read.value as { turnId?: unknown; step?: unknown } | null) ?? {}) : {}
}

const toStep = (row: Row): StepStream => {
  const payload = readPayload(row.payload)
  return {
    effectId: row.effect_id,
    threadId: row.aggregate_id,
    turnId: String(payload.turnId ?? ""),
    step: Number(payload.step ?? 0),
    status: row.status,
    attempts: Number(row.attempts),
    sequence: Number(row.sequence)
  }
}

/** The step whose chunks carry this effect id; undefined when it is no model step (or was pruned). */
export const stepOfEffect = (effectId: string): Effect.Effect<StepStream | undefined, SqlError, SqlClient> =>
  Effect.flatMap(
    SqlClient,
    (sql) => sql<Row>`SELECT effect_id, aggregate_id, payload, status, attempts, sequence FROM outbox
      WHERE effect_id = ${effectId} AND kind = 'model.step' AND aggregate_type = 'thread'`
  ).pipe(Effect.map((rows) => (rows[0] === undefined ? undefined : toStep(rows[0]))))

/** A thread's model steps still kept (retention prunes settled rows), oldest first; of one turn when given. */
export const stepsOfThread = (
  threadId: string,
  options: { readonly turnId?: string | undefined } = {}
): Effect.Effect<ReadonlyArray<StepStream>, SqlError, SqlClient> =>
  Effect.flatMap(
    SqlClient,
    (sql) => sql<Row>`SELECT effect_id, aggregate_id, payload, status, attempts, sequence FROM outbox
      WHERE aggregate_id = ${threadId} AND aggregate_type = 'thread' AND kind = 'model.step' ORDER BY sequence`
  ).pipe(
    Effect.map((rows) =>
      rows.map(toStep).filter((step) => options.turnId === undefined || step.turnId === options.turnId)
    )
  )
