/**
 * What differs between the two stores, in one place. The engine's SQL is one logical schema over
 * `SqlClient`; this service holds the few behaviours that are not SQL text:
 *
 * - SQLite is held by one process (an EXCLUSIVE file lock), so every write is already serialized and
 *   every committed row is visible in sequence order.
 * - PostgreSQL is shared by several server processes. Each dispatch transaction first takes one
 *   transaction-scoped advisory lock (the *append lock*): sequences are handed out and committed one
 *   transaction at a time, so a reader of "rows after N" can never see N+1 before N (gaps from
 *   rollbacks are allowed, skips never), receipts stay unique under duplicates from two processes,
 *   and the in-memory aggregate cache is re-validated against what other processes committed.
 *
 * The default value is SQLite's, so an engine over `SqliteStore.layer` needs nothing else.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, type Scope, Stream } from "effect"
import type { NodeIdInUse } from "../Errors.js"
import type { Receipt } from "../Receipts.js"

/** What other processes committed since this one last looked (PostgreSQL only). */
export interface ForeignCommits {
  /** The log head after them. */
  readonly head: number
  /** Aggregates they wrote events for: their cached state is stale. */
  readonly aggregates: ReadonlyArray<{ readonly aggregateType: string; readonly aggregateId: string }>
}

/** What a dispatch transaction learns as it begins. */
export interface BatchStart {
  readonly foreign: ForeignCommits | undefined
  /** The batch's receipts when the store read them with its first statement; else the writer reads them. */
  readonly receipts: ReadonlyMap<string, Receipt> | undefined
}

export interface StoreBackendShape {
  readonly dialect: "sqlite" | "postgres"
  /** Opens a write transaction. SQLite takes its write lock up front so a batch never upgrades. */
  readonly beginWrite: string
  /** Whether running rows of a dead previous incarnation may belong to live peers (shared store). */
  readonly shared: boolean
  /**
   * First step of every dispatch transaction, given the head this process knows and the batch's
   * command ids. PostgreSQL takes the append lock, then reads what other processes committed and
   * the batch's receipts in one round trip; SQLite has nothing to do.
   */
  readonly beginBatch: (
    knownHead: number,
    commandIds: ReadonlyArray<string>
  ) => Effect.Effect<BatchStart, SqlError, SqlClient>
  /**
   * Runs `body` in a transaction ordered with every dispatch transaction (PostgreSQL: it takes the
   * append lock): it sees each dispatch that committed before it, and none commits while it runs. A
   * write computed from a read of other rows (a reactor cursor) cannot then be based on a snapshot
   * that a concurrent dispatch has already made stale. SQLite serializes every write already.
   */
  readonly orderedWithDispatch: <A, E, R>(body: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R | SqlClient>
  /** Runs `body` while no other process runs it (migrations and projection setup at boot). */
  readonly exclusively: <A, E, R>(
    name: string,
    body: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | SqlError, R | SqlClient>
  /** Hints that another process committed (LISTEN/NOTIFY); never data. Empty for SQLite. */
  readonly foreignCommitHints: Stream.Stream<void, SqlError>
  /**
   * Rings the other processes' `foreignCommitHints` for a change made outside a dispatch (which rings
   * them as it commits): a performer's word that its handler stopped. Nothing to do for SQLite.
   */
  readonly notifyOthers: Effect.Effect<void, SqlError, SqlClient>
  /** `FOR UPDATE SKIP LOCKED` where the store has it: concurrent claimers skip each other's rows. */
  readonly skipLocked: string
  /**
   * Holds this node id for the scope's lifetime, failing when a live process already holds it. On a
   * shared store this is what lets boot settle its own previous incarnation's rows at once: no live
   * process can be running under the same node id.
   */
  readonly holdNodeId: (nodeId: string) => Effect.Effect<void, NodeIdInUse | SqlError, SqlClient | Scope.Scope>
}

export const sqliteBackend: StoreBackendShape = {
  dialect: "sqlite",
  beginWrite: "BEGIN IMMEDIATE",
  shared: false,
  beginBatch: () => Effect.succeed({ foreign: undefined, receipts: undefined }),
  orderedWithDispatch: (body) => body,
  exclusively: (_name, body) => body,
  foreignCommitHints: Stream.empty,
  notifyOthers: Effect.void,
  skipLocked: "",
  // The file lock already makes this process the only one on the store.
  holdNodeId: () => Effect.void
}

export class StoreBackend extends Context.Reference<StoreBackend>()("orchestration/StoreBackend", {
  defaultValue: () => sqliteBackend
}) {}
