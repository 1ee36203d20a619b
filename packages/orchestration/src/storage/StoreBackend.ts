/**
 * What differs between the two stores, in one place. The engine's SQL is one logical schema over
 * `SqlClient`; this service holds the few behaviours that are not SQL text:
 *
 * - SQLite is held by one process (an EXCLUSIVE file lock), so every write is already serialized and
 *   every committed row is visible in sequence order.
 * - PostgreSQL is shared by several server processes, whose dispatch transactions run side by side
 *   (issue 20): each takes its transaction id before any sequence, sequences commit out of order, and
 *   every reader of "rows after N" of a whole table reads only up to its commit horizon
 *   (CommitHorizon.ts), so a row that commits late is seen late, never skipped. Receipts and
 *   aggregate versions are unique constraints (a losing writer runs again on fresh state), cached
 *   aggregate state is re-validated by version at each batch, and settlements compare-and-set.
 *   `appendLock: true` (PostgresStore) restores the old schema-wide append lock on top of this.
 *
 * The default value is SQLite's, so an engine over `SqliteStore.layer` needs nothing else.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, type Scope, Stream } from "effect"
import type { NodeIdInUse } from "../Errors.js"
import type { Receipt } from "../Receipts.js"

/** An aggregate whose state the process holds, at the version it holds. */
export interface CachedVersion {
  readonly aggregateType: string
  readonly aggregateId: string
  readonly version: number
}

/** What a dispatch transaction learns as it begins (PostgreSQL only). */
export interface BatchStart {
  /** Cached aggregates whose committed version is another than the cached one: their state is stale. */
  readonly stale: ReadonlyArray<{ readonly aggregateType: string; readonly aggregateId: string }>
  /** The log head as the batch's first statement saw it (undefined: the store did not look). */
  readonly head: number | undefined
  /** The batch's receipts when the store read them with its first statement; else the writer reads them. */
  readonly receipts: ReadonlyMap<string, Receipt> | undefined
}

/**
 * A reader's commit horizon for one table: every row at or below `trusted` that will ever commit is
 * visible now (undefined: no cap, every committed row is, as on SQLite). `waiting`: newer rows were
 * seen that are not trusted yet, so a reader that found nothing should look again soon even without
 * a hint (the transactions it waits for may end without one: a rollback, another database's).
 */
export interface CommitHorizonView {
  readonly trusted: number | undefined
  readonly waiting: boolean
}

const unbounded: CommitHorizonView = { trusted: undefined, waiting: false }

export interface StoreBackendShape {
  readonly dialect: "sqlite" | "postgres"
  /** Opens a write transaction. SQLite takes its write lock up front so a batch never upgrades. */
  readonly beginWrite: string
  /** Whether running rows of a dead previous incarnation may belong to live peers (shared store). */
  readonly shared: boolean
  /**
   * First step of every dispatch transaction, given the cached versions of the batch's aggregates and
   * its command ids. PostgreSQL takes the transaction's id before any sequence (CommitHorizon.ts) and
   * rings the other processes at COMMIT, and in the same round trip reads the batch's receipts, the
   * committed versions of those aggregates and the log head; SQLite has nothing to do.
   */
  readonly beginBatch: (
    cached: ReadonlyArray<CachedVersion>,
    commandIds: ReadonlyArray<string>
  ) => Effect.Effect<BatchStart, SqlError, SqlClient>
  /**
   * Runs `body` in a transaction of its own (with `appendLock`, ordered with every dispatch). A
   * write computed from a read of other rows (a reactor cursor) takes its row lock first in `body`
   * (`lockForUpdate`): see ReactorCursors.ts. SQLite serializes every write already.
   */
  readonly inOwnTransaction: <A, E, R>(body: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R | SqlClient>
  /**
   * The commit horizon of a table's `sequence` for this process's readers of the whole table (the
   * log's followers, reactor claims and cursor advances), refreshed by this call. Must not run inside
   * a transaction that has written (its id would predate the observation). Every row committed before
   * the call is at or below `trusted`, or `waiting` is set: a reader woken by a commit's hint either
   * reads that commit or knows to look again. SQLite: no cap.
   */
  readonly horizon: (
    table: "events" | "outbox",
    /**
     * The caller needs the horizon at or above this sequence (a head it read): a store that may answer
     * without a look (see `ownCommit`) looks when its horizon is below it. Infinity: look, whatever
     * the store knows (a poll that must find a row whose hint was lost).
     */
    atLeast?: number
  ) => Effect.Effect<CommitHorizonView, SqlError, SqlClient>
  /**
   * Told after each commit of this process's dispatch batches, with what `claimAlone` saw when the
   * batch was the store's only writer until its COMMIT: then every row of either table at or below
   * those tops that will ever commit is visible, so the horizons move there without a look, and the
   * readers that commit rings need none. Any other commit (not alone) makes the next reads look.
   * Nothing to do for SQLite.
   */
  readonly ownCommit: (alone: AloneTops | undefined) => Effect.Effect<void>
  /**
   * How long (ms) the oldest running writer of the store has had its transaction open, or undefined
   * when none runs or the store has no commit horizon (SQLite). It holds every reader's horizon back:
   * readers of the whole log and reactors stall behind it (nothing is skipped). For /health.
   */
  readonly oldestWriterMs: Effect.Effect<number | undefined, SqlError, SqlClient>
  /** `FOR UPDATE` where the store has it: a read that a later write in its transaction depends on. */
  readonly lockForUpdate: string
  /** `FOR SHARE` where the store has it: a read whose row must not change until the transaction ends. */
  readonly lockForShare: string
  /** Runs `body` while no other process runs it (migrations and projection setup at boot). */
  readonly exclusively: <A, E, R>(
    name: string,
    body: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | SqlError, R | SqlClient>
  /** Hints that another process committed (LISTEN/NOTIFY); never data. Empty for SQLite. */
  readonly foreignCommitHints: Stream.Stream<void, SqlError>
  /**
   * Rings the other processes' `foreignCommitHints` for a change made outside a dispatch (which rings
   * them as it commits): a performer's word that its handler stopped, a row handed back or failed by
   * an operator (`notifyOthersOfRowWrite`). Nothing to do for SQLite.
   */
  readonly notifyOthers: Effect.Effect<void, SqlError, SqlClient>
  /** `FOR UPDATE SKIP LOCKED` where the store has it: concurrent claimers skip each other's rows. */
  readonly skipLocked: string
  /**
   * In a writing transaction, before a claim in it (CommitClaims.ts): whether this is the only writer,
   * kept so until COMMIT (PostgreSQL: CommitHorizon.WRITERS_ALONE). Always true on SQLite (one writer).
   */
  readonly claimAlone: Effect.Effect<AloneTops | undefined, SqlError, SqlClient>
  /**
   * Holds this node id for the scope's lifetime, failing when a live process already holds it. On a
   * shared store this is what lets boot settle its own previous incarnation's rows at once: no live
   * process can be running under the same node id.
   */
  readonly holdNodeId: (nodeId: string) => Effect.Effect<void, NodeIdInUse | SqlError, SqlClient | Scope.Scope>
}

/**
 * A batch that is the store's only writer until its COMMIT (StoreBackend.claimAlone), and the newest
 * sequence of each table its statement saw: every row at or below them is committed at that COMMIT.
 */
export interface AloneTops {
  readonly events: number
  readonly outbox: number
}

/** SQLite: always alone, and no horizon to move. */
const sqliteAlone: AloneTops = { events: 0, outbox: 0 }

/** SQLite has one writer, this process: no other writer can hold a horizon back. */
const noOtherWriter: number | undefined = undefined

export const sqliteBackend: StoreBackendShape = {
  dialect: "sqlite",
  beginWrite: "BEGIN IMMEDIATE",
  shared: false,
  beginBatch: () => Effect.succeed({ stale: [], head: undefined, receipts: undefined }),
  inOwnTransaction: (body) => body,
  horizon: () => Effect.succeed(unbounded),
  ownCommit: () => Effect.void,
  oldestWriterMs: Effect.succeed(noOtherWriter),
  lockForUpdate: "",
  lockForShare: "",
  exclusively: (_name, body) => body,
  foreignCommitHints: Stream.empty,
  notifyOthers: Effect.void,
  skipLocked: "",
  claimAlone: Effect.succeed(sqliteAlone),
  // The file lock already makes this process the only one on the store.
  holdNodeId: () => Effect.void
}

export class StoreBackend extends Context.Reference<StoreBackend>()("orchestration/StoreBackend", {
  defaultValue: () => sqliteBackend
}) {}

/**
 * `notifyOthers` after a row update that may have made an outbox row claimable (a hand-back, an operator
 * failing a parked row): the write is done, so a notification that cannot be sent is logged, not failed.
 */
export const notifyOthersOfRowWrite = (backend: StoreBackendShape): Effect.Effect<void, never, SqlClient> =>
  backend.notifyOthers.pipe(
    Effect.catchAll((error) =>
      // swallow-ok: the row is written; the other processes' reactors find it at their poll
      Effect.logWarning("could not notify the other processes of a freed outbox row; they find it at their poll", error)
    )
  )
