/**
 * The tables of the thread read models and how a store made by an older version is brought up to
 * them. Setup runs at every engine start, so each statement is idempotent.
 */
import type { SqlClient as SqlClientService } from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { run } from "./ThreadProjection.js"

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

/** Creates the tables if missing and adds the columns older stores lack. */
export const setupThreadTables = run((sql) =>
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
)

/** Empties the tables, before a rebuild from the log. */
export const resetThreadTables = run((sql) =>
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
)
