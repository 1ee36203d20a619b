/**
 * The commit horizon: how a reader of "rows after sequence N" on PostgreSQL can stay correct when
 * writers are NOT serialized by the append lock (issue 20). The PostgreSQL store keeps one horizon
 * per table per process (PostgresStore.ts); the log's followers, reactor claims and cursor advances
 * read through it. This module is the reader's rule, proven by test/postgres/commit-horizon.test.ts
 * against the forms that skip rows.
 *
 * Without the lock, sequences are handed out in one order and committed in another: row 11 can be
 * visible while row 10 is still uncommitted, and a cursor moved to 11 would skip 10 for good. The
 * reader therefore trusts a sequence L only once no transaction that could still commit a row at or
 * below L is running:
 *
 * - Writers take their transaction id before any sequence (`WRITER_XID_FIRST`, which also takes the
 *   schema's writers' lock so readers can tell this schema's writers from the cluster's), so a transaction
 *   whose xid was assigned after a reader's snapshot takes only sequences above everything that
 *   snapshot saw.
 * - A reader observes, in ONE statement: L, the newest sequence its snapshot sees, and R, an xid
 *   assigned during that statement (so after the snapshot). Every transaction that could hold an
 *   uncommitted sequence ≤ L has an xid below R.
 * - A later statement that finds every writer of the schema older than R ended (`fromRow`; the
 *   cluster-wide form is a snapshot's xmin > R) sees every one of those ended: from then on every
 *   row ≤ L that will ever exist is visible, and L is trusted.
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
 * A long-open writer of the schema holds the horizon back: readers stall (nothing is skipped) until
 * it ends. Transactions of other schemas and databases do not (they hold no writers' lock here).
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
 * Pure: whether a statement that saw `newest` left rows above the horizon that nothing waits on (it
 * trusted what waited and took no xid of its own). Only an observation can trust them; a reader told
 * nothing waits would not look again until its next hint.
 */
export const unobserved = (horizon: Horizon, newest: number) =>
  horizon.waiting === undefined && newest > horizon.trusted

/**
 * One look from `start`: an observation statement (with an xid only when nothing waits), another that
 * observes when the first trusted what waited but saw newer rows (`unobserved`), and a last one without
 * an xid when something still waits (its writers have often committed by now). Its answer covers every
 * row committed before it started. The horizon is computed here and answered whole: the caller stores
 * it only once the look has succeeded, because a look stopped half-way (a lost connection, an
 * interruption) could leave a horizon that trusted what waited without observing the newer rows, and a
 * caller that skips its own look behind a completed one (serialLooks) would read that.
 */
export const look = <E, R>(
  start: Horizon,
  statement: (observe: boolean) => Effect.Effect<ObservationRow, E, R>
): Effect.Effect<Horizon, E, R> =>
  Effect.gen(function* () {
    let horizon = start
    const once = (observe: boolean) =>
      Effect.map(statement(observe), (row) => {
        horizon = fromRow(horizon, row)
        return Number(row.newest)
      })
    const observed = wantsObservation(horizon)
    const newest = yield* once(observed)
    if (!observed && unobserved(horizon, newest)) yield* once(true)
    if (!wantsObservation(horizon)) yield* once(false)
    return horizon
  })

/**
 * The writers' lock of one schema: every transaction that writes its sequences holds it, shared,
 * from its first statement on. The horizon waits for those writers only: the snapshot's xmin is the
 * whole cluster's, and a transaction left open in another schema or database (another test, another
 * application) would stall every reader of this one.
 */
export const writersName = (schema: string) => `orchestration:${schema}:writers`

/**
 * First statement of every writing transaction (`$1`: writersName): the xid before any sequence,
 * and the writers' lock (the key's high half is 0, so pg_locks shows it as classid 0, objid key).
 */
export const WRITER_XID_FIRST =
  "SELECT pg_current_xact_id(), pg_advisory_xact_lock_shared(hashtext($1)::bigint & 4294967295)"

/**
 * For a claim inside a writing transaction (CommitClaims.ts), before it (`$1`: writersName): the
 * schema's writers' lock taken EXCLUSIVE, if no other transaction holds it (this one's own shared hold
 * does not conflict), until COMMIT. True: no other writer runs, and none can start (each takes the
 * lock shared first) until this transaction ends, so a claim in a later statement, with a snapshot
 * taken after the lock, sees every row of a lower sequence that will ever commit: a lane check there
 * is complete. A condition in the claim itself is not enough: its snapshot is taken when it starts, a
 * writer may commit (visible) and release its lock between that and the condition's read of pg_locks,
 * and its lower row of the lane would be missed (found in review, 2026-12-03).
 *
 * The same statement answers the newest sequence of each table it sees (StoreBackend.ownCommit): every
 * row at or below them is committed at this transaction's COMMIT. Its snapshot predates the lock, but a
 * writer running at that snapshot either ended before the lock was granted (its rows committed, or gone
 * with its rollback) or made the lock fail; a writer without the lock has taken no sequence yet, and
 * takes it after this COMMIT.
 */
export const WRITERS_ALONE = `SELECT pg_try_advisory_xact_lock(hashtext($1)::bigint & 4294967295) AS alone,
  (SELECT MAX(sequence) FROM events) AS events_top, (SELECT MAX(sequence) FROM outbox) AS outbox_top`

/**
 * The observation statement for one table with a `sequence` column: L, the 32-bit xids of the
 * schema's running writers (`$2`: writersName), and (when `$1` is true) R. R is only taken in a
 * transaction without an xid of its own: an xid assigned by an earlier statement predates this
 * snapshot, and would not bound the writers that are still running. The writers come from ONE read
 * of pg_locks (their writers' lock joined to each one's own transactionid lock).
 */
export const observeStatement = (table: "events" | "outbox") =>
  `WITH l AS MATERIALIZED (SELECT pid, locktype, database, classid, objid, objsubid, transactionid, granted FROM pg_locks)
  SELECT (SELECT COALESCE(MAX(sequence), 0) FROM ${table}) AS newest,
    ARRAY(SELECT x.transactionid::text FROM l w JOIN l x ON x.pid = w.pid AND x.locktype = 'transactionid' AND x.granted
      WHERE w.locktype = 'advisory' AND w.granted AND w.classid = 0 AND w.objsubid = 1
        AND w.objid = (hashtext($2)::bigint & 4294967295)::oid
        AND w.database = (SELECT oid FROM pg_database WHERE datname = current_database())) AS writers,
    CASE WHEN $1::boolean AND pg_current_xact_id_if_assigned() IS NULL THEN pg_current_xact_id()::text END AS after`

/** How long (ms) the schema's oldest running writer (`$1`: writersName) has been open; NULL when none. */
export const oldestWriterStatement = `SELECT FLOOR(EXTRACT(EPOCH FROM clock_timestamp() - MIN(a.xact_start)) * 1000)::bigint AS ms
  FROM pg_locks w JOIN pg_stat_activity a ON a.pid = w.pid
  WHERE w.locktype = 'advisory' AND w.granted AND w.classid = 0 AND w.objsubid = 1
    AND w.objid = (hashtext($1)::bigint & 4294967295)::oid
    AND w.database = (SELECT oid FROM pg_database WHERE datname = current_database())`

export interface ObservationRow {
  readonly newest: number | string
  /** The 32-bit xids (epoch-less, as pg_locks shows them) of the schema's running writers. */
  readonly writers: ReadonlyArray<string>
  readonly after: string | null
}

const XID_SPACE = 2n ** 32n

/**
 * Pure: whether a running writer's 32-bit xid is older than R. xids wrap around at 2^32 and
 * PostgreSQL keeps every running one within 2^31 of the newest, so "older" is a difference in
 * (0, 2^31) modulo 2^32.
 */
export const xidBefore = (xid32: bigint, after: bigint): boolean => {
  const difference = ((((after % XID_SPACE) - xid32) % XID_SPACE) + XID_SPACE) % XID_SPACE
  return difference > 0n && difference < XID_SPACE / 2n
}

/**
 * Pure: the horizon after an observation statement's row. The row gives the step what a snapshot's
 * xmin would, but for this schema's writers alone: above the waiting R when no writer older than R
 * is still running, at R otherwise.
 */
export const fromRow = (horizon: Horizon, row: ObservationRow): Horizon => {
  const waiting = horizon.waiting
  const olderRunning = waiting !== undefined && row.writers.some((xid) => xidBefore(BigInt(xid), waiting.after))
  const xmin = waiting === undefined ? 0n : olderRunning ? waiting.after : waiting.after + 1n
  return step(horizon, xmin, row.after === null ? undefined : { newest: Number(row.newest), after: BigInt(row.after) })
}

/**
 * Pure: the horizon a process keeps once a look answers `looked`, when it holds `current` by then.
 * A look computes its answer from the horizon as it started, so `current` may have moved meanwhile:
 * an alone commit of this process (StoreBackend.ownCommit) trusts rows the look's snapshot did not
 * see. Stored as it was, the answer moved the horizon back below that commit's rows, and a reader the
 * commit rang read without a look (the process vouched for every row by then) and missed them until
 * its poll. Both are proven, so the newer trusted sequence stands, and the look's waiting observation
 * only while it is above it. Looks are serial, so `current` has no waiting observation the look did
 * not start from.
 */
export const afterLook = (current: Horizon, looked: Horizon): Horizon => {
  const trusted = Math.max(current.trusted, looked.trusted)
  return {
    trusted,
    waiting: looked.waiting !== undefined && looked.waiting.newest > trusted ? looked.waiting : undefined
  }
}

/**
 * Runs a table's looks one at a time, and lets a caller skip its own look when another caller's did
 * the work for it. A look's running-writers list only speaks for an R assigned before that list was
 * read, so two looks of one table must never be in flight together; callers that queue behind a look
 * would each run one more (0.7 looks per operation in the end-to-end bench, issue 20).
 *
 * The freshness rule: a caller's horizon comes from a look that STARTED after the caller arrived. A
 * reader woken by a commit hint then never reads a horizon older than the commit hinted at (a look
 * already in flight at its arrival may have read MAX(sequence) before that commit). So a caller
 * remembers how many looks had started when it arrived, and once it holds the permit skips its look
 * only if a look numbered above that has completed. Skipping is sound whatever happened in between:
 * the horizon only moves forward and is always safe to read. A failed or interrupted look completes
 * nothing, so the next caller looks itself.
 */
export const serialLooks = <E, R>(look: Effect.Effect<void, E, R>): Effect.Effect<void, E, R> => {
  const permit = Effect.unsafeMakeSemaphore(1)
  /** Looks started so far; a look's number is this count once it has started. */
  let started = 0
  /** The number of the newest look that completed (looks run one at a time, so numbers complete in order). */
  let completed = 0
  return Effect.suspend(() => {
    const arrival = started
    return permit.withPermits(1)(
      Effect.suspend(() => {
        if (completed > arrival) return Effect.void
        started += 1
        const number = started
        return Effect.tap(
          look,
          Effect.sync(() => {
            completed = number
          })
        )
      })
    )
  })
}

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
