/**
 * The thread read models, updated in the commit transaction of the events they show: threads, turns,
 * tool calls, and the provider-ready transcript. The transcript is a projection of committed events
 * only, so nothing is "already appended" before its write commits (the 2026-09-10 bug).
 */
import type { SqlClient as SqlClientService } from "@effect/sql/SqlClient"
import { SqlClient } from "@effect/sql/SqlClient"
import { Projection } from "@orchestration/engine"
import { Effect } from "effect"
import { Thread, type ResultRecord, type ThreadEvent } from "./Thread.js"
import { validateTranscript, type TranscriptMessage, type TranscriptProblem } from "./Transcript.js"

const run = <A>(f: (sql: SqlClientService) => Effect.Effect<A, any, any>) =>
  Effect.flatMap(SqlClient, f).pipe(Effect.asVoid)

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

/** Adds a column that stores made by an older version lack; answers whether it was added. */
const addColumnIfMissing = (sql: SqlClientService, table: string, column: string, definition: string) =>
  Effect.gen(function* () {
    const [row] = yield* sql.onDialectOrElse({
      pg: () => sql<{ n: number }>`SELECT COUNT(*) AS n FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = ${table} AND column_name = ${column}`,
      orElse: () => sql<{ n: number }>`SELECT COUNT(*) AS n FROM pragma_table_info(${table}) WHERE name = ${column}`
    })
    if (Number(row?.n ?? 0) > 0) return false
    yield* sql.unsafe(`ALTER TABLE ${table} ADD COLUMN ${column} ${definition}`)
    return true
  })

export const ThreadViews = Projection.make(Thread, {
  name: "agent_threads",
  setup: run((sql) =>
    Effect.all(
      [
        sql`CREATE TABLE IF NOT EXISTS agent_threads (thread_id TEXT PRIMARY KEY, title TEXT, status TEXT NOT NULL, updated_seq INTEGER NOT NULL)`,
        sql`CREATE TABLE IF NOT EXISTS agent_turns (
        turn_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, ordinal INTEGER, message_id TEXT NOT NULL,
        status TEXT NOT NULL, reason TEXT, steps INTEGER NOT NULL DEFAULT 0, queued_seq INTEGER NOT NULL, updated_seq INTEGER NOT NULL)`,
        sql`CREATE INDEX IF NOT EXISTS agent_turns_by_thread ON agent_turns (thread_id, queued_seq)`,
        // The operator's thread list pages by recency, optionally within one status.
        sql`CREATE INDEX IF NOT EXISTS agent_threads_by_update ON agent_threads (updated_seq)`,
        sql`CREATE INDEX IF NOT EXISTS agent_threads_by_status ON agent_threads (status, updated_seq)`,
        sql`CREATE TABLE IF NOT EXISTS agent_tool_calls (
        effect_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, turn_id TEXT NOT NULL, step INTEGER NOT NULL, call_id TEXT NOT NULL,
        transcript_id TEXT NOT NULL, name TEXT NOT NULL, arguments TEXT NOT NULL, result TEXT, outcome TEXT, late_status TEXT,
        position INTEGER NOT NULL DEFAULT 0, status TEXT)`,
        // Stores made before \`position\` existed get the column (their rows keep SQLite's rowid order).
        addColumnIfMissing(sql, "agent_tool_calls", "position", "INTEGER NOT NULL DEFAULT 0"),
        // Stores made before \`status\` existed get it, filled from what they still know: the late
        // settlement, the settled row if retention kept it, else the result the model was told.
        Effect.flatMap(addColumnIfMissing(sql, "agent_tool_calls", "status", "TEXT"), (added) =>
          added
            ? Effect.asVoid(sql`UPDATE agent_tool_calls SET status = COALESCE(late_status,
              (SELECT o.status FROM outbox o WHERE o.effect_id = agent_tool_calls.effect_id AND o.status IN ('succeeded', 'failed', 'cancelled')),
              CASE outcome WHEN 'succeeded' THEN 'succeeded' WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END)
            WHERE outcome IS NOT NULL`)
            : Effect.void
        ),
        sql`CREATE INDEX IF NOT EXISTS agent_tool_calls_by_turn ON agent_tool_calls (turn_id)`,
        // Approvals (Approval.ts): awaiting | approved | denied | expired | cancelled, its deadline and note.
        addColumnIfMissing(sql, "agent_tool_calls", "approval", "TEXT"),
        addColumnIfMissing(sql, "agent_tool_calls", "approval_deadline", "BIGINT"),
        addColumnIfMissing(sql, "agent_tool_calls", "approval_note", "TEXT"),
        sql`CREATE INDEX IF NOT EXISTS agent_tool_calls_by_approval ON agent_tool_calls (approval)`,
        sql`CREATE TABLE IF NOT EXISTS agent_messages (thread_id TEXT NOT NULL, position INTEGER NOT NULL, message TEXT NOT NULL, PRIMARY KEY (thread_id, position))`
      ],
      { discard: true }
    )
  ),
  reset: run((sql) =>
    Effect.all(
      [
        sql`DELETE FROM agent_threads`,
        sql`DELETE FROM agent_turns`,
        sql`DELETE FROM agent_tool_calls`,
        sql`DELETE FROM agent_messages`
      ],
      {
        discard: true
      }
    )
  ),
  apply: (event: ThreadEvent, record) => {
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
        return Effect.all(
          [
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
            run(
              (sql) =>
                sql`UPDATE agent_threads SET status = 'running', updated_seq = ${seq} WHERE thread_id = ${threadId}`
            ),
            appendMessage(threadId, { role: "user", content: event.text })
          ],
          { discard: true }
        )
      case "model.responded":
        return Effect.all(
          [
            run(
              (sql) =>
                sql`UPDATE agent_turns SET steps = ${event.step}, updated_seq = ${seq} WHERE turn_id = ${event.turnId}`
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
          ],
          { discard: true }
        )
      case "tool.result":
        return Effect.all(
          [
            recordResult(event.result, settledStatus(event.result.outcome)),
            appendMessage(threadId, toolMessage(event.result))
          ],
          {
            discard: true
          }
        )
      case "turn.completed":
        return Effect.all(
          [
            run(
              (sql) =>
                sql`UPDATE agent_turns SET status = 'completed', steps = ${event.steps}, updated_seq = ${seq} WHERE turn_id = ${event.turnId}`
            ),
            run(
              (sql) =>
                sql`UPDATE agent_threads SET status = 'idle', updated_seq = ${seq} WHERE thread_id = ${threadId} AND status = 'running'`
            ),
            appendMessage(threadId, { role: "assistant", content: event.text })
          ],
          { discard: true }
        )
      case "turn.ended":
        return Effect.all(
          [
            run(
              (sql) =>
                sql`UPDATE agent_turns SET status = ${event.status}, reason = ${event.reason}, updated_seq = ${seq} WHERE turn_id = ${event.turnId}`
            ),
            run(
              (sql) =>
                sql`UPDATE agent_threads SET status = 'idle', updated_seq = ${seq} WHERE thread_id = ${threadId} AND status = 'running'`
            ),
            // The same command cancels each unanswered call's row; a running one is stopped by its
            // performer (the engine's CancelWatch). A late settlement (effect.late) records the final one.
            ...event.synthetic.flatMap((result) => [
              recordResult(result, "cancelled"),
              appendMessage(threadId, toolMessage(result))
            ])
          ],
          { discard: true }
        )
      case "approval.requested":
        return Effect.all(
          [
            run(
              (sql) =>
                sql`UPDATE agent_tool_calls SET approval = 'awaiting', approval_deadline = ${event.deadline}, status = 'awaiting-approval' WHERE effect_id = ${event.effect.id}`
            ),
            run(
              (sql) =>
                sql`UPDATE agent_turns SET status = 'awaiting-approval', updated_seq = ${seq} WHERE turn_id = ${event.turnId} AND status = 'running'`
            )
          ],
          { discard: true }
        )
      case "approval.closed":
        return Effect.all(
          [
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
          ],
          { discard: true }
        )
      case "effect.late":
        return run(
          (sql) =>
            sql`UPDATE agent_tool_calls SET late_status = ${event.status}, status = ${event.status} WHERE effect_id = ${event.effectId}`
        )
      case "thread.deleted":
        return Effect.all(
          [
            run(
              (sql) =>
                sql`UPDATE agent_threads SET status = 'deleted', updated_seq = ${seq} WHERE thread_id = ${threadId}`
            ),
            run(
              (sql) =>
                sql`UPDATE agent_turns SET status = 'interrupted', reason = 'thread deleted', updated_seq = ${seq} WHERE thread_id = ${threadId} AND status = 'queued'`
            )
          ],
          { discard: true }
        )
      case "thread.cleaned":
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
})

// ---- queries ----------------------------------------------------------------------------------

export const transcriptOf = (threadId: string) =>
  Effect.flatMap(
    SqlClient,
    (sql) =>
      sql<{ message: string }>`SELECT message FROM agent_messages WHERE thread_id = ${threadId} ORDER BY position`
  ).pipe(Effect.map((rows) => rows.map((r) => JSON.parse(r.message) as TranscriptMessage)))

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
  readonly messages: ReadonlyArray<TranscriptMessage>
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
      messages: yield* transcriptOf(threadId)
    }
    return view
  })

export const transcriptView = (threadId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const [thread] = yield* sql<{ status: string }>`SELECT status FROM agent_threads WHERE thread_id = ${threadId}`
    if (thread === undefined) return undefined
    const messages = yield* transcriptOf(threadId)
    const validation = validateTranscript(messages, { allowTrailingOpenCalls: thread.status === "running" })
    return { messages, valid: validation.valid, problems: validation.problems as ReadonlyArray<TranscriptProblem> }
  })

/** One row of the operator's thread list: the thread, its latest turn, and when it last moved. */
export interface ThreadSummary {
  readonly threadId: string
  readonly title: string | null
  readonly status: string
  /** The list's order and cursor: the sequence of the thread's last status change. */
  readonly updatedSequence: number
  readonly turnCount: number
  readonly queuedTurns: number
  /** Sequence and time of the thread's newest event: its last progress of any kind. */
  readonly lastSequence: number
  readonly lastEventAt: number
  /** The running turn, else the newest one; null for a thread that never had a message. */
  readonly latestTurn: {
    readonly turnId: string
    readonly status: string
    readonly reason: string | null
    readonly steps: number
    readonly queuedAt: number
    readonly updatedAt: number
  } | null
}

export interface ThreadListOptions {
  readonly limit: number
  /** A cursor: the `updatedSequence` the previous page ended at (the next page continues past it). */
  readonly after?: number | undefined
  readonly status?: string | undefined
  /** `newest` (default) or `oldest` first: oldest running threads are the likeliest to be stuck. */
  readonly order?: "newest" | "oldest" | undefined
}

/**
 * A page of threads, most recently changed first (or least, with `order: "oldest"`), with the cursor
 * of the next page (undefined on the last one). Reads a bounded number of rows whatever the number of threads: the list is keyed on
 * `updated_seq`, unique per thread since each event belongs to one thread.
 */
export const listThreads = (options: ThreadListOptions) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const oldest = options.order === "oldest"
    const conditions = [
      options.status === undefined ? sql`1 = 1` : sql`t.status = ${options.status}`,
      options.after === undefined
        ? sql`1 = 1`
        : oldest
          ? sql`t.updated_seq > ${options.after}`
          : sql`t.updated_seq < ${options.after}`
    ]
    const rows = yield* sql<{
      thread_id: string
      title: string | null
      status: string
      updated_seq: number
      turn_count: number
      queued_turns: number
      last_sequence: number | null
    }>`SELECT t.thread_id, t.title, t.status, t.updated_seq,
        (SELECT COUNT(*) FROM agent_turns u WHERE u.thread_id = t.thread_id) AS turn_count,
        (SELECT COUNT(*) FROM agent_turns u WHERE u.thread_id = t.thread_id AND u.status = 'queued') AS queued_turns,
        (SELECT MAX(e.sequence) FROM events e WHERE e.aggregate_id = t.thread_id AND e.aggregate_type = 'thread') AS last_sequence
      FROM agent_threads t WHERE ${sql.and(conditions)} ORDER BY t.updated_seq ${sql.unsafe(oldest ? "ASC" : "DESC")} LIMIT ${options.limit + 1}`
    const page = rows.slice(0, options.limit)
    const ids = page.map((r) => r.thread_id)
    const sequences = page.map((r) => Number(r.last_sequence ?? r.updated_seq))
    const turns = yield* sql<{
      thread_id: string
      turn_id: string
      status: string
      reason: string | null
      steps: number
      queued_at: number | null
      updated_at: number | null
    }>`SELECT u.thread_id, u.turn_id, u.status, u.reason, u.steps, q.occurred_at AS queued_at, w.occurred_at AS updated_at
      FROM agent_turns u
      LEFT JOIN events q ON q.sequence = u.queued_seq
      LEFT JOIN events w ON w.sequence = u.updated_seq
      WHERE ${sql.in("u.thread_id", ids)} AND u.turn_id = (
        SELECT x.turn_id FROM agent_turns x WHERE x.thread_id = u.thread_id
        ORDER BY CASE WHEN x.status IN ('running', 'awaiting-approval') THEN 0 ELSE 1 END, x.queued_seq DESC LIMIT 1)`
    const times = yield* sql<{
      sequence: number
      occurred_at: number
    }>`SELECT sequence, occurred_at FROM events WHERE ${sql.in("sequence", sequences)}`
    const timeOf = new Map(times.map((r) => [Number(r.sequence), Number(r.occurred_at)]))
    const turnOf = new Map(turns.map((u) => [u.thread_id, u]))
    const threads = page.map((r, index): ThreadSummary => {
      const turn = turnOf.get(r.thread_id)
      const lastSequence = sequences[index]!
      return {
        threadId: r.thread_id,
        title: r.title,
        status: r.status,
        updatedSequence: Number(r.updated_seq),
        turnCount: Number(r.turn_count),
        queuedTurns: Number(r.queued_turns),
        lastSequence,
        lastEventAt: timeOf.get(lastSequence) ?? 0,
        latestTurn:
          turn === undefined
            ? null
            : {
                turnId: turn.turn_id,
                status: turn.status,
                reason: turn.reason,
                steps: Number(turn.steps),
                queuedAt: Number(turn.queued_at ?? 0),
                updatedAt: Number(turn.updated_at ?? 0)
              }
      }
    })
    const last = page.at(-1)
    return { threads, next: rows.length > options.limit && last !== undefined ? Number(last.updated_seq) : undefined }
  })

/** How many threads are in each status (idle, running, deleted). */
export const threadCountsByStatus = Effect.flatMap(
  SqlClient,
  (sql) => sql<{ status: string; n: number }>`SELECT status, COUNT(*) AS n FROM agent_threads GROUP BY status`
).pipe(Effect.map((rows) => Object.fromEntries(rows.map((r) => [r.status, Number(r.n)])) as Record<string, number>))

/** A call waiting for an operator, as GET /v1/approvals lists it. */
export interface PendingApproval {
  readonly threadId: string
  readonly turnId: string
  /** The id `tool.approve` / `tool.deny` name: the call's thread-unique (transcript) id. */
  readonly callId: string
  readonly name: string
  readonly arguments: unknown
  readonly effectId: string
  /** When it is answered "denied: no approval within …" (epoch ms). */
  readonly deadline: number
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
        arguments: JSON.parse(r.arguments) as unknown,
        effectId: r.effect_id,
        deadline: Number(r.approval_deadline ?? 0)
      })
    )
  })
