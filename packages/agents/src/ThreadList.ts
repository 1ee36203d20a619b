/**
 * The operator's thread list: pages of threads by recency with each one's latest turn, and the count
 * of threads in each status.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

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
