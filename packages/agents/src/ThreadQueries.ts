/**
 * Reads of one thread: its turns and tool calls, its transcript with the validator's verdict, and the
 * calls awaiting an operator. Rows come from the read models `ThreadProjection.ts` keeps.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { StoredJson } from "@orchestration/engine"
import { Effect, Schema } from "effect"
import { TranscriptMessage, type TranscriptProblem, validateTranscript } from "./Transcript.js"

/** A stored transcript message that is not JSON, or not a message (cut off, hand-edited): where it sits and why. */
export interface UnreadableMessage {
  /** Its stored position in the thread (the first message is 1). */
  readonly position: number
  readonly why: string
}

const readMessage = StoredJson.reader(TranscriptMessage, "message")

/**
 * A thread's transcript as stored: the messages that can be read, in order, and those that cannot.
 * A read that threw on one damaged row failed the whole thread view and transcript route. A message
 * of another shape cannot be read either: trusted, it threw in the validator, or went to a provider.
 */
export const storedTranscriptOf = (threadId: string) =>
  Effect.flatMap(
    SqlClient,
    (sql) =>
      sql<{
        position: number | string
        message: string
      }>`SELECT position, message FROM agent_messages WHERE thread_id = ${threadId} ORDER BY position`
  ).pipe(
    Effect.map((rows) => {
      const messages: Array<TranscriptMessage> = []
      const unreadable: Array<UnreadableMessage> = []
      for (const r of rows) {
        const read = readMessage(r.message)
        if (read.ok) messages.push(read.value)
        else unreadable.push({ position: Number(r.position), why: read.why })
      }
      return { messages, unreadable }
    })
  )

/** The transcript has a message that cannot be read: a model must not be sent it with the hole. */
export class TranscriptUnreadable extends Schema.TaggedError<TranscriptUnreadable>()("TranscriptUnreadable", {
  threadId: Schema.String,
  position: Schema.Number,
  message: Schema.String
}) {}

/** The provider-ready transcript: every message, or TranscriptUnreadable naming the first that cannot be read. */
export const transcriptOf = (threadId: string) =>
  Effect.flatMap(storedTranscriptOf(threadId), ({ messages, unreadable }) => {
    const first = unreadable[0]
    return first === undefined
      ? Effect.succeed(messages)
      : Effect.fail(
          new TranscriptUnreadable({
            threadId,
            position: first.position,
            message: `message ${first.position} of thread '${threadId}' cannot be read: ${first.why}`
          })
        )
  })

/** `unreadableMessages`, present only when some are (as an effect's `undecodable`). */
const unreadableField = (unreadable: ReadonlyArray<UnreadableMessage>) =>
  unreadable.length === 0 ? {} : { unreadableMessages: unreadable }

export interface ToolCallView {
  readonly callId: string
  /** The id the transcript's assistant message uses for this call (differs from callId on reuse). */
  readonly transcriptId: string
  readonly name: string
  readonly effectId: string
  /**
   * The effect's status: pending | running while its row is unsettled (read live), then the final
   * succeeded | failed | cancelled the read model recorded when it settled (kept after retention).
   */
  readonly status: string
  readonly result?: string
  /** What the model was told: succeeded | failed | interrupted | cancelled | unknown-tool | storage | denied. */
  readonly outcome?: string
  /** For a call that waited for an operator: awaiting | approved | denied | expired | cancelled. */
  readonly approval?: { readonly status: string; readonly deadline: number; readonly note: string | null }
}

export interface TurnView {
  readonly turnId: string
  readonly status: string
  readonly reason?: string
  readonly steps: number
  readonly toolCalls: ReadonlyArray<ToolCallView>
}

export interface ThreadView {
  readonly threadId: string
  readonly title: string | null
  readonly status: string
  readonly turns: ReadonlyArray<TurnView>
  /** The messages that can be read; the others are in `unreadableMessages`. */
  readonly messages: ReadonlyArray<TranscriptMessage>
  readonly unreadableMessages?: ReadonlyArray<UnreadableMessage>
}

/**
 * An unsettled row's live status (pending, running) first: a call interrupted while running is
 * recorded "cancelled" until its late settlement says how it really ended. Then the recorded final
 * status, which outlives the row; a store from before it was recorded falls back to the row, and a
 * call with neither (an unknown tool) failed at once.
 */
const toolCallStatus = (live: string | null, recorded: string | null): string =>
  live === "pending" || live === "running" ? live : (recorded ?? live ?? "failed")

export const threadView = (threadId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const [thread] = yield* sql<{
      title: string | null
      status: string
    }>`SELECT title, status FROM agent_threads WHERE thread_id = ${threadId}`
    if (thread === undefined) return undefined
    const turns = yield* sql<{ turn_id: string; status: string; reason: string | null; steps: number }>`
      SELECT turn_id, status, reason, steps FROM agent_turns WHERE thread_id = ${threadId} ORDER BY queued_seq`
    const calls = yield* sql<{
      turn_id: string
      call_id: string
      transcript_id: string
      name: string
      effect_id: string
      result: string | null
      outcome: string | null
      recorded: string | null
      live: string | null
      approval: string | null
      approval_deadline: number | string | null
      approval_note: string | null
    }>`
      SELECT c.turn_id, c.call_id, c.transcript_id, c.name, c.effect_id, c.result, c.outcome, c.status AS recorded, o.status AS live,
      c.approval, c.approval_deadline, c.approval_note FROM agent_tool_calls c
      LEFT JOIN outbox o ON o.effect_id = c.effect_id WHERE c.thread_id = ${threadId}
      ORDER BY c.step, c.position, ${sql.onDialectOrElse({ pg: () => sql.literal("c.effect_id"), orElse: () => sql.literal("c.rowid") })}`
    const transcript = yield* storedTranscriptOf(threadId)
    const view: ThreadView = {
      threadId,
      title: thread.title,
      status: thread.status,
      turns: turns.map(
        (t): TurnView => ({
          turnId: t.turn_id,
          status: t.status,
          ...(t.reason !== null ? { reason: t.reason } : {}),
          steps: Number(t.steps),
          toolCalls: calls
            .filter((c) => c.turn_id === t.turn_id)
            .map(
              (c): ToolCallView => ({
                callId: c.call_id,
                transcriptId: c.transcript_id,
                name: c.name,
                effectId: c.effect_id,
                status: toolCallStatus(c.live, c.recorded),
                ...(c.result !== null ? { result: c.result } : {}),
                ...(c.outcome !== null ? { outcome: c.outcome } : {}),
                ...(c.approval !== null
                  ? {
                      approval: {
                        status: c.approval,
                        deadline: Number(c.approval_deadline ?? 0),
                        note: c.approval_note
                      }
                    }
                  : {})
              })
            )
        })
      ),
      messages: transcript.messages,
      ...unreadableField(transcript.unreadable)
    }
    return view
  })

export const transcriptView = (threadId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const [thread] = yield* sql<{ status: string }>`SELECT status FROM agent_threads WHERE thread_id = ${threadId}`
    if (thread === undefined) return undefined
    const { messages, unreadable } = yield* storedTranscriptOf(threadId)
    const validation = validateTranscript(messages, { allowTrailingOpenCalls: thread.status === "running" })
    return {
      messages,
      // With a message missing it cannot be replayed to a provider, whatever the rest says.
      valid: validation.valid && unreadable.length === 0,
      problems: validation.problems as ReadonlyArray<TranscriptProblem>,
      ...unreadableField(unreadable)
    }
  })

/** A call waiting for an operator, as GET /v1/approvals lists it. */
export interface PendingApproval {
  readonly threadId: string
  readonly turnId: string
  /** The id `tool.approve` / `tool.deny` name: the call's thread-unique (transcript) id. */
  readonly callId: string
  readonly name: string
  /** The call's arguments; null when they cannot be read (`undecodable` says why). */
  readonly arguments: unknown
  readonly undecodable?: string
  readonly effectId: string
  /** When it is answered "denied: no approval within …" (epoch ms). */
  readonly deadline: number
}

/** The arguments, or why they cannot be read: one damaged row is listed as such, not failing the list. */
const argumentsOf = (text: string): { readonly arguments: unknown; readonly undecodable?: string } => {
  const read = StoredJson.read(text, "argument text")
  return read.ok ? { arguments: read.value } : { arguments: null, undecodable: read.why }
}

/** Calls awaiting approval, oldest deadline first; of one thread when `threadId` is given. */
export const pendingApprovals = (options: { readonly threadId?: string | undefined; readonly limit: number }) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const rows = yield* sql<{
      thread_id: string
      turn_id: string
      transcript_id: string
      name: string
      arguments: string
      effect_id: string
      approval_deadline: number | string | null
    }>`SELECT thread_id, turn_id, transcript_id, name, arguments, effect_id, approval_deadline FROM agent_tool_calls
      WHERE approval = 'awaiting' AND ${options.threadId === undefined ? sql`1 = 1` : sql`thread_id = ${options.threadId}`}
      ORDER BY approval_deadline, effect_id LIMIT ${options.limit}`
    return rows.map(
      (r): PendingApproval => ({
        threadId: r.thread_id,
        turnId: r.turn_id,
        callId: r.transcript_id,
        name: r.name,
        ...argumentsOf(r.arguments),
        effectId: r.effect_id,
        deadline: Number(r.approval_deadline ?? 0)
      })
    )
  })
