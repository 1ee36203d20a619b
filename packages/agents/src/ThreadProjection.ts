/**
 * How each thread event moves the read models (threads, turns, tool calls, transcript). It runs in
 * the commit transaction of the event, so the transcript holds committed events only: nothing is
 * "already appended" before its write commits (the 2026-09-10 bug).
 */
import type { SqlClient as SqlClientService } from "@effect/sql/SqlClient"
import { SqlClient } from "@effect/sql/SqlClient"
import type { EventRecord } from "@orchestration/engine"
import { Effect } from "effect"
import type { ResultRecord, ThreadEvent } from "./Thread.js"
import type { TranscriptMessage } from "./Transcript.js"

export const run = <A>(f: (sql: SqlClientService) => Effect.Effect<A, any, any>) =>
  Effect.flatMap(SqlClient, f).pipe(Effect.asVoid)

type EventOf<T extends ThreadEvent["type"]> = Extract<ThreadEvent, { readonly type: T }>

const appendMessage = (threadId: string, message: TranscriptMessage) =>
  run(
    (sql) =>
      sql`INSERT INTO agent_messages (thread_id, position, message)
      SELECT ${threadId}, COALESCE(MAX(position), 0) + 1, ${JSON.stringify(message)} FROM agent_messages WHERE thread_id = ${threadId}`
  )

const toolMessage = (result: ResultRecord): TranscriptMessage => ({
  role: "tool",
  tool_call_id: result.transcriptId,
  content: result.content
})

/**
 * The call's final status as its effect row had it when it settled. The read model keeps it because
 * retention deletes settled outbox rows: the view must not infer a status from a row that is gone.
 * A result from the call's outcome settles with it; an unknown tool never had a row and failed at once.
 */
const settledStatus = (outcome: ResultRecord["outcome"]): "succeeded" | "failed" | "cancelled" | "denied" =>
  outcome === "succeeded" || outcome === "cancelled" || outcome === "denied" ? outcome : "failed"

const recordResult = (result: ResultRecord, status: "succeeded" | "failed" | "cancelled" | "denied") =>
  run(
    (sql) =>
      sql`UPDATE agent_tool_calls SET result = ${result.content}, outcome = ${result.outcome}, status = ${status} WHERE effect_id = ${result.effectId}`
  )

/** A turn that ends, either way, leaves its thread idle (unless the thread was deleted meanwhile). */
const threadIdle = (threadId: string, seq: number) =>
  run(
    (sql) =>
      sql`UPDATE agent_threads SET status = 'idle', updated_seq = ${seq} WHERE thread_id = ${threadId} AND status = 'running'`
  )

const all = (effects: ReadonlyArray<Effect.Effect<void, any, any>>) => Effect.all(effects, { discard: true })

const turnStarted = (event: EventOf<"turn.started">, threadId: string, seq: number) =>
  all([
    run(
      (sql) =>
        sql`INSERT INTO agent_turns ${sql.insert({
          turn_id: event.turnId,
          thread_id: threadId,
          ordinal: event.ordinal,
          message_id: event.messageId,
          status: "running",
          reason: null,
          steps: 0,
          queued_seq: seq,
          updated_seq: seq
        })} ON CONFLICT (turn_id) DO UPDATE SET ordinal = excluded.ordinal, status = 'running', updated_seq = excluded.updated_seq`
    ),
    run((sql) => sql`UPDATE agent_threads SET status = 'running', updated_seq = ${seq} WHERE thread_id = ${threadId}`),
    appendMessage(threadId, { role: "user", content: event.text })
  ])

const modelResponded = (event: EventOf<"model.responded">, threadId: string, seq: number) =>
  all([
    run(
      (sql) => sql`UPDATE agent_turns SET steps = ${event.step}, updated_seq = ${seq} WHERE turn_id = ${event.turnId}`
    ),
    ...event.toolCalls.map((call, position) =>
      run(
        (sql) =>
          sql`INSERT INTO agent_tool_calls ${sql.insert({
            effect_id: call.effectId,
            thread_id: threadId,
            turn_id: event.turnId,
            step: event.step,
            call_id: call.callId,
            transcript_id: call.transcriptId,
            name: call.name,
            arguments: JSON.stringify(call.arguments ?? {}),
            position
          })}`
      )
    ),
    appendMessage(threadId, {
      role: "assistant",
      content: event.text === "" ? null : event.text,
      tool_calls: event.toolCalls.map((call) => ({
        id: call.transcriptId,
        type: "function" as const,
        function: { name: call.name, arguments: JSON.stringify(call.arguments ?? {}) }
      }))
    })
  ])

const turnEnded = (event: EventOf<"turn.ended">, threadId: string, seq: number) =>
  all([
    run(
      (sql) =>
        sql`UPDATE agent_turns SET status = ${event.status}, reason = ${event.reason}, updated_seq = ${seq} WHERE turn_id = ${event.turnId}`
    ),
    threadIdle(threadId, seq),
    // The same command cancels each unanswered call's row; a running one is stopped by its
    // performer (the engine's CancelWatch). A late settlement (effect.late) records the final one.
    ...event.synthetic.flatMap((result) => [
      recordResult(result, "cancelled"),
      appendMessage(threadId, toolMessage(result))
    ])
  ])

const approvalRequested = (event: EventOf<"approval.requested">, seq: number) =>
  all([
    run(
      (sql) =>
        sql`UPDATE agent_tool_calls SET approval = 'awaiting', approval_deadline = ${event.deadline}, status = 'awaiting-approval' WHERE effect_id = ${event.effect.id}`
    ),
    run(
      (sql) =>
        sql`UPDATE agent_turns SET status = 'awaiting-approval', updated_seq = ${seq} WHERE turn_id = ${event.turnId} AND status = 'running'`
    )
  ])

const approvalClosed = (event: EventOf<"approval.closed">, threadId: string, seq: number) =>
  all([
    // Approved: the status is the effect row's now (pending, running, then its settlement).
    run((sql) =>
      event.verdict === "approved"
        ? sql`UPDATE agent_tool_calls SET approval = ${event.verdict}, approval_note = ${event.note}, status = NULL
                  WHERE thread_id = ${threadId} AND transcript_id = ${event.transcriptId}`
        : sql`UPDATE agent_tool_calls SET approval = ${event.verdict}, approval_note = ${event.note}
                  WHERE thread_id = ${threadId} AND transcript_id = ${event.transcriptId}`
    ),
    run(
      (sql) =>
        sql`UPDATE agent_turns SET status = 'running', updated_seq = ${seq} WHERE turn_id = ${event.turnId}
                AND status = 'awaiting-approval' AND NOT EXISTS (SELECT 1 FROM agent_tool_calls c
                WHERE c.turn_id = ${event.turnId} AND c.approval = 'awaiting')`
    )
  ])

/** Applies one committed thread event to the read models. */
export const applyThreadEvent = (event: ThreadEvent, record: EventRecord) => {
  const threadId = record.aggregateId
  const seq = record.sequence
  switch (event.type) {
    case "thread.created":
      return run(
        (sql) =>
          sql`INSERT INTO agent_threads ${sql.insert({ thread_id: threadId, title: event.title, status: "idle", updated_seq: seq })}`
      )
    case "message.queued":
      return run(
        (sql) =>
          sql`INSERT INTO agent_turns ${sql.insert({
            turn_id: event.turnId,
            thread_id: threadId,
            ordinal: null,
            message_id: event.messageId,
            status: "queued",
            reason: null,
            queued_seq: seq,
            updated_seq: seq
          })}`
      )
    case "turn.started":
      return turnStarted(event, threadId, seq)
    case "model.responded":
      return modelResponded(event, threadId, seq)
    case "tool.result":
      return all([
        recordResult(event.result, settledStatus(event.result.outcome)),
        appendMessage(threadId, toolMessage(event.result))
      ])
    case "turn.completed":
      return all([
        run(
          (sql) =>
            sql`UPDATE agent_turns SET status = 'completed', steps = ${event.steps}, updated_seq = ${seq} WHERE turn_id = ${event.turnId}`
        ),
        threadIdle(threadId, seq),
        appendMessage(threadId, { role: "assistant", content: event.text })
      ])
    case "turn.ended":
      return turnEnded(event, threadId, seq)
    case "approval.requested":
      return approvalRequested(event, seq)
    case "approval.closed":
      return approvalClosed(event, threadId, seq)
    case "effect.late":
      return run(
        (sql) =>
          sql`UPDATE agent_tool_calls SET late_status = ${event.status}, status = ${event.status} WHERE effect_id = ${event.effectId}`
      )
    case "thread.deleted":
      return all([
        run(
          (sql) => sql`UPDATE agent_threads SET status = 'deleted', updated_seq = ${seq} WHERE thread_id = ${threadId}`
        ),
        run(
          (sql) =>
            sql`UPDATE agent_turns SET status = 'interrupted', reason = 'thread deleted', updated_seq = ${seq} WHERE thread_id = ${threadId} AND status = 'queued'`
        )
      ])
    case "thread.cleaned":
    // The turn's failure and its reason come with the turn.ended decided with it.
    case "turn.timer-failed":
      return Effect.void
    // Delegate-and-await: a withdrawn queued message never runs; waits are visible through their calls.
    case "delegation.withdrawn":
      return run(
        (sql) =>
          sql`UPDATE agent_turns SET status = 'interrupted', reason = ${event.reason}, updated_seq = ${seq} WHERE turn_id = ${event.turnId} AND status = 'queued'`
      )
    // Its row settled when the other thread took the message; the call waits for that turn's end.
    case "delegate.awaiting":
      return run(
        (sql) =>
          sql`UPDATE agent_tool_calls SET status = 'awaiting-answer' WHERE effect_id = ${event.effectId} AND outcome IS NULL`
      )
    case "delegation.accepted":
    case "delegate.closed":
      return Effect.void
  }
}
