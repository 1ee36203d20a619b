/**
 * The commit horizon: how a reader of "rows after sequence N" on PostgreSQL can stay correct when
 * writers are NOT serialized by the append lock (issue 20). NOT WIRED IN: the store still takes the
 * append lock (StoreBackend.ts), under which every committed row is visible in sequence order and
 * this horizon would always equal the log head. This module is the reader's rule, proven by
 * test/postgres/commit-horizon.test.ts against the forms that skip rows; docs/benchmarks-postgres.md
 * says what is left before the lock can go.
 *
 * Without the lock, sequences are handed out in one order and committed in another: row 11 can be
 * visible while row 10 is still uncommitted, and a cursor moved to 11 would skip 10 for good. The
 * reader therefore trusts a sequence L only once no transaction that could still commit a row at or
 * below L is running:
 *
 * - Writers take their transaction id before any sequence (`WRITER_XID_FIRST`), so a transaction
 *   whose xid was assigned after a reader's snapshot takes only sequences above everything that
 *   snapshot saw.
 * - A reader observes, in ONE statement: L, the newest sequence its snapshot sees, and R, an xid
 *   assigned during that statement (so after the snapshot). Every transaction that could hold an
 *   uncommitted sequence ≤ L has an xid below R.
 * - A later statement whose snapshot has xmin > R sees every one of those ended: from then on
 *   every row ≤ L that will ever exist is visible, and L is trusted.
 *
 * Why not the snapshot's in-progress list (`pg_snapshot_xip`) instead of R: a snapshot lists only
 * xids below its xmax (the newest *completed* xid + 1). A writer that took its xid after the newest
 * transaction that has completed is running but in no list, while rows of that completed
 * transaction above the writer's sequence are visible; trusting them skips the writer's row. And why
 * not `xid < pg_snapshot_xmin(…)` on each row: xid order is not sequence order (a batch takes its
 * xid at its first write and later sequences long after), so a sequence cursor moved past such a
 * row skips the rows of a younger xid below it.
 *
 * What readers do with it (each rule is a test in test/postgres/commit-horizon.test.ts):
 * - Followers of the whole log, claims and cursor advances read only sequences ≤ the trusted
 *   horizon. Claims must: "no earlier unsettled row of the lane" is only true of rows whose earlier
 *   rows are all visible. A follower of ONE aggregate needs no horizon: an aggregate's versions
 *   commit in order (the unique version constraint refuses a writer that decided on stale state).
 * - A cursor advance runs in its own transaction: the cursor's row lock (`FOR UPDATE`) first, then
 *   the position from a snapshot after it, capped at the horizon. A write that makes a row pending
 *   again lowers EVERY cursor (`LEAST(position, row - 1)`), not only those at or above the row, so it
 *   either waits for an advance that holds the lock and lowers what it wrote, or holds the lock
 *   first and the advance's snapshot sees the row. (Today's `WHERE position >= row` misses an
 *   advance whose cursor is still below the row but whose stale snapshot moves it above.)
 *
 * A long-open transaction anywhere in the cluster holds xmin, so every horizon, back: readers stall
 * (nothing is skipped) until it ends.
 */
import { Effect } from "effect"

/** What one statement saw: the newest visible sequence, and an xid assigned after its snapshot. */
export interface Observation {
  readonly newest: number
  readonly after: bigint
}

/**
 * A reader's horizon. Every row at or below `trusted` that will ever commit is visible now;
 * `waiting` is the newest observation not yet trusted (one at a time: a reader under steady writes
 * would otherwise replace it before it could ever be trusted).
 */
export interface Horizon {
  readonly trusted: number
  readonly waiting: Observation | undefined
}

export const initial: Horizon = { trusted: 0, waiting: undefined }

/**
 * Pure: the horizon after one observation statement, given that statement's snapshot xmin (every
 * xid below it had ended) and what it observed (`undefined` when it observed nothing new).
 */
export const step = (horizon: Horizon, xmin: bigint, observed: Observation | undefined): Horizon => {
  let { trusted, waiting } = horizon
  if (waiting !== undefined && waiting.after < xmin) {
    trusted = Math.max(trusted, waiting.newest)
    waiting = undefined
  }
  if (waiting === undefined && observed !== undefined && observed.newest > trusted) waiting = observed
  return { trusted, waiting }
}

/** Whether the next observation statement should take an xid: only when nothing is waiting. */
export const wantsObservation = (horizon: Horizon) => horizon.waiting === undefined

/**
 * First statement of every writing transaction (and what a `DEFAULT` of the sequence columns would
 * do, so no writer can forget it): the xid before any sequence.
 */
export const WRITER_XID_FIRST = "SELECT pg_current_xact_id()"

/**
 * The observation statement for one table with a `sequence` column: L, the snapshot's xmin and (when
 * `$1` is true) R. R is only taken in a transaction without an xid of its own: an xid assigned by an
 * earlier statement predates this snapshot, and would not bound the writers that are still running.
 */
export const observeStatement = (table: "events" | "outbox") =>
  `SELECT (SELECT COALESCE(MAX(sequence), 0) FROM ${table}) AS newest,
    pg_snapshot_xmin(pg_current_snapshot())::text AS xmin,
    CASE WHEN $1::boolean AND pg_current_xact_id_if_assigned() IS NULL THEN pg_current_xact_id()::text END AS after`

export interface ObservationRow {
  readonly newest: number | string
  readonly xmin: string
  readonly after: string | null
}

/** Pure: the horizon after an observation statement's row. */
export const fromRow = (horizon: Horizon, row: ObservationRow): Horizon =>
  step(
    horizon,
    BigInt(row.xmin),
    row.after === null ? undefined : { newest: Number(row.newest), after: BigInt(row.after) }
  )

/** How soon a reader with rows waiting above its horizon looks again without a hint. */
export const RECHECK_MS = 10

/**
 * Waits RECHECK_MS of wall-clock time. Not the Clock service's time: what a reader waits for is other
 * transactions of the database ending, which happens in real time whatever clock the process's
 * fibers read (a TestClock in tests), and may happen without a hint (a rollback, another database's).
 */
export const recheckSoon: Effect.Effect<void> = Effect.async<void>((resume) => {
  const timer = setTimeout(() => resume(Effect.void), RECHECK_MS)
  return Effect.sync(() => clearTimeout(timer))
})
