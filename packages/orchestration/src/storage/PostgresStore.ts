/**
 * Opening the shared store: PostgreSQL through @effect/sql-pg, for several server processes on one
 * database. The engine's SQL is the same as on SQLite; what differs lives in the StoreBackend this
 * layer provides (see StoreBackend.ts): the append lock, LISTEN/NOTIFY hints, SKIP LOCKED claims,
 * node-id locks, cross-process migrations, and the commit horizon that lets dispatches of several
 * processes run side by side (issue 20).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted, Stream } from "effect"
import { randomUUID } from "node:crypto"
import pg from "pg"
import type { NodeIdInUse, StorageFailure } from "../Errors.js"
import * as Receipts from "../Receipts.js"
import * as CommitHorizon from "./CommitHorizon.js"
import * as PgSessions from "./PgSessions.js"
import { StoreBackend, type StoreBackendShape } from "./StoreBackend.js"
import { toStorageFailure } from "./StorageErrors.js"

export interface PostgresStoreOptions {
  /** `postgres://user@host:port/database` (DATABASE_URL). */
  readonly url: string
  /**
   * The schema the engine's tables live in (default `public`). One engine per schema: the append
   * lock, node ids and commit hints are all scoped to it, so tests can share one database.
   */
  readonly schema?: string
  readonly maxConnections?: number
  readonly applicationName?: string
  /**
   * Called when this process lost its node id to another process (its lock session was lost and the
   * id was taken before the lock could be taken again). Default: log and end the process (SIGTERM).
   */
  readonly onNodeIdLost?: (error: NodeIdInUse) => Effect.Effect<void>
  /**
   * Serialize every dispatch of every process on the schema with one append lock, as before issue 20
   * (default false: dispatches run side by side, readers gate on the commit horizon). For comparison
   * and as a way back; the horizon's readers, version checks and compare-and-set run either way.
   */
  readonly appendLock?: boolean
}

const endProcess = (error: NodeIdInUse) =>
  Effect.logFatal("another process now runs under this node id; stopping this one", error).pipe(
    Effect.zipRight(Effect.sync(() => process.kill(process.pid, "SIGTERM")))
  )

// int8 (COUNT, BIGINT columns, BIGSERIAL sequences) and numeric (SUM) arrive as strings from
// node-postgres; every such value the engine stores (sequences, epoch milliseconds, counts) is far
// below 2^53, so numbers are exact and the rows look the same as SQLite's.
const INT8_OID = 20
const NUMERIC_OID = 1700
const types = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === INT8_OID || oid === NUMERIC_OID
      ? (value: string) => (value === null ? null : Number(value))
      : pg.types.getTypeParser(oid, format as "text")) as any
}

/** What a reader is answered: the trusted sequence, and whether rows wait above it. */
const viewOf = (horizon: CommitHorizon.Horizon) => ({
  trusted: horizon.trusted,
  waiting: horizon.waiting !== undefined
})

const versionKey = (aggregateType: string, aggregateId: string) => `${aggregateType}\u0000${aggregateId}`

/** The receipt columns after command_id, aggregate_type and aggregate_id, as NULLs (beginBatch's other rows). */
const receiptNulls = Receipts.columns
  .slice(3)
  .map(() => "NULL")
  .join(", ")

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,40}$/

/** The URL with the schema as the connection's search_path. */
const withSearchPath = (url: string, schema: string) => {
  const parsed = new URL(url)
  parsed.searchParams.set("options", `-c search_path=${schema}`)
  return parsed.toString()
}

const makeBackend = (
  sessions: PgSessions.SessionOptions,
  schema: string,
  onNodeIdLost: (error: NodeIdInUse) => Effect.Effect<void>,
  appendLock: boolean
): StoreBackendShape => {
  const channel = `orchestration_${schema}`
  // Our own notifications come back to us too; our commits already rang locally, so they are skipped.
  const self = randomUUID()
  const lockKey = (name: string) => `orchestration:${schema}:${name}`
  const writers = CommitHorizon.writersName(schema)
  // One horizon per table for every reader of this process; each refresh moves it.
  const horizons: Record<"events" | "outbox", CommitHorizon.Horizon> = {
    events: CommitHorizon.initial,
    outbox: CommitHorizon.initial
  }
  /**
   * When a horizon may be answered without a look (`ownCommit`): only while the LISTEN session is up
   * (a foreign commit is then always hinted, and each hint marks the horizons unsure), and only while
   * nothing this process cannot vouch for happened since that table's last look began. `unsure`
   * counts what may have added rows the horizons do not cover (a foreign hint, a commit of ours that
   * was not alone); a look records the count it started at, `coveredAt`, once it succeeds.
   */
  const known = { listening: false, unsure: 1, coveredAt: { events: 0, outbox: 0 } }
  /**
   * One look. Its answer covers every row committed before it started: at or below `trusted`, or
   * `waiting` (the reader looks again soon without a hint). A reader woken by a commit's hint relies on
   * it: trusting an older observation alone could leave the hinted row above `trusted` with nothing
   * waiting, and the reader asleep until its poll.
   */
  const lookAt = (table: "events" | "outbox") =>
    Effect.flatMap(SqlClient, (sql) =>
      Effect.suspend(() => {
        const startedAt = known.unsure
        return CommitHorizon.look(horizons[table], (observe) =>
          Effect.map(
            sql.unsafe<CommitHorizon.ObservationRow>(CommitHorizon.observeStatement(table), [observe, writers]),
            (rows) => rows[0]!
          )
        ).pipe(
          Effect.map((horizon) => {
            horizons[table] = CommitHorizon.afterLook(horizons[table], horizon)
            known.coveredAt[table] = Math.max(known.coveredAt[table], startedAt)
          })
        )
      })
    )
  // One look at a time per table, coalesced (CommitHorizon.serialLooks): a look's list of running
  // writers only speaks for writers older than the waiting R if it was read after R was assigned. Two
  // readers' looks in flight together could apply an older list to a newer R, and trust a row a
  // writer not in that list may still commit below.
  const looks = {
    events: CommitHorizon.serialLooks(lookAt("events")),
    outbox: CommitHorizon.serialLooks(lookAt("outbox"))
  }
  return {
    dialect: "postgres",
    beginWrite: "BEGIN",
    shared: true,
    beginBatch: (cached, commandIds) =>
      Effect.gen(function* () {
        const sql = yield* SqlClient
        // With `appendLock`: the lock, held to COMMIT, in a statement of its own (a statement's snapshot
        // is taken when it starts, so reads in the statement that waited would miss the commit waited for).
        if (appendLock) yield* sql`SELECT pg_advisory_xact_lock(hashtext(${lockKey("append")}))`
        // One round trip: the transaction's id before any sequence and the schema's writers' lock
        // (CommitHorizon.WRITER_XID_FIRST), the hint to other processes (delivered at COMMIT; a rolled-back batch notifies nobody), the
        // batch's receipts, the committed versions of its cached aggregates, and the log head.
        // Each cached aggregate's newest version, one index entry each (the newest of its unique
        // (type, id, version) index). Not MAX(version) … GROUP BY: PostgreSQL computes that by reading
        // every event of the aggregate, so a batch for a long thread read its whole history.
        // 0 for an aggregate without events, as the cache compares it.
        const versions =
          cached.length === 0
            ? sql.literal("")
            : sql`UNION ALL
          SELECT NULL, c.aggregate_type, c.aggregate_id, ${sql.literal(receiptNulls)},
            COALESCE((SELECT e.version FROM events e WHERE e.aggregate_type = c.aggregate_type AND e.aggregate_id = c.aggregate_id
              ORDER BY e.version DESC LIMIT 1), 0), NULL
          FROM (VALUES ${sql.csv(
            cached.map((c) => sql`(CAST(${c.aggregateType} AS TEXT), CAST(${c.aggregateId} AS TEXT))`)
          )}) AS c (aggregate_type, aggregate_id)`
        const rows = yield* sql<Receipts.ReceiptRow & { version: number | null; head: number | null }>`
          SELECT r.*, NULL::bigint AS version, NULL::bigint AS head FROM receipts r WHERE ${sql.in("r.command_id", commandIds)}
          ${versions}
          UNION ALL
          SELECT NULL, NULL, NULL, ${sql.literal(receiptNulls)}, NULL, (SELECT MAX(sequence) FROM events)
          FROM (SELECT pg_current_xact_id(), pg_advisory_xact_lock_shared(hashtext(${writers})::bigint & 4294967295),
            pg_notify(${channel}, ${self})) AS w`
        const receipts = new Map<string, Receipts.Receipt>()
        const committed = new Map<string, number>()
        let head: number | undefined
        for (const row of rows) {
          if (row.command_id !== null) receipts.set(row.command_id, Receipts.toReceipt(row))
          else if (row.version !== null)
            committed.set(versionKey(row.aggregate_type, row.aggregate_id), Number(row.version))
          else head = Number(row.head ?? 0)
        }
        // Another process wrote a version since this one cached the state: the cached state is stale.
        const stale = cached.filter(
          (c) => (committed.get(versionKey(c.aggregateType, c.aggregateId)) ?? 0) !== c.version
        )
        return { stale, head, receipts }
      }),
    inOwnTransaction: <A, E, R>(body: Effect.Effect<A, E, R>) =>
      Effect.flatMap(SqlClient, (sql) =>
        sql.withTransaction(
          appendLock
            ? // Waits for an open dispatch to commit; the body's statements then read fresh snapshots.
              Effect.zipRight(sql`SELECT pg_advisory_xact_lock(hashtext(${lockKey("append")}))`, body)
            : body
        )
      ),
    horizon: (table, atLeast) =>
      Effect.suspend(() => {
        // Every row committed before this call is at or below `trusted` already: the horizon moved past
        // this process's own alone commits (`ownCommit`), and nothing else can have committed unhinted
        // since the last look began. A look would find the same.
        const current = horizons[table]
        const covered =
          known.listening &&
          known.unsure === known.coveredAt[table] &&
          current.waiting === undefined &&
          (atLeast === undefined || current.trusted >= atLeast)
        return covered ? Effect.succeed(viewOf(current)) : Effect.map(looks[table], () => viewOf(horizons[table]))
      }),
    ownCommit: (alone) =>
      Effect.sync(() => {
        if (alone === undefined) {
          known.unsure++
          return
        }
        // The batch held the schema's writers' lock exclusively until its COMMIT (CommitHorizon.WRITERS_ALONE):
        // every row at or below the tops its statement saw is committed now.
        for (const table of ["events", "outbox"] as const) {
          const current = horizons[table]
          const trusted = Math.max(current.trusted, alone[table])
          const waiting =
            current.waiting !== undefined && current.waiting.newest > trusted ? current.waiting : undefined
          horizons[table] = { trusted, waiting }
        }
      }),
    oldestWriterMs: Effect.flatMap(SqlClient, (sql) =>
      Effect.map(sql.unsafe<{ ms: number | null }>(CommitHorizon.oldestWriterStatement, [writers]), (rows) =>
        rows[0]?.ms === null || rows[0]?.ms === undefined ? undefined : Number(rows[0].ms)
      )
    ),
    lockForUpdate: "FOR UPDATE",
    lockForShare: "FOR SHARE",
    exclusively: <A, E, R>(name: string, body: Effect.Effect<A, E, R>) =>
      Effect.scoped(
        Effect.gen(function* () {
          const sql = yield* SqlClient
          // A session lock on a connection reserved for the duration; the body runs on others.
          const conn = yield* sql.reserve
          yield* conn.executeUnprepared("SELECT pg_advisory_lock(hashtext($1))", [lockKey(name)], undefined)
          return yield* body.pipe(
            Effect.ensuring(
              // A failed unlock means the connection broke, and a broken connection's session (and its
              // lock) ends with it; it is logged, and the body's own result is what the caller needs.
              conn.executeUnprepared("SELECT pg_advisory_unlock(hashtext($1))", [lockKey(name)], undefined).pipe(
                Effect.catchAll((error) =>
                  Effect.logWarning(`could not release the ${name} lock; it ends with its connection`, error)
                ) // swallow-ok: logged; the lock dies with the broken session
              )
            )
          )
        })
      ),
    // A lost LISTEN session fails the stream and the engine re-opens it; each (re-)open also wakes
    // readers once (`undefined`), for the commits made while nobody listened.
    foreignCommitHints: PgSessions.listen(
      { ...sessions, applicationName: `${sessions.applicationName}:listen` },
      channel
    ).pipe(
      // Up: every foreign commit from now on is hinted. Each element (a hint, or the wake-up of an
      // (re-)open) may stand for events the horizon does not cover.
      Stream.tap(() =>
        Effect.sync(() => {
          known.listening = true
        })
      ),
      Stream.filter((from) => from !== self),
      Stream.tap(() =>
        Effect.sync(() => {
          known.unsure++
        })
      ),
      Stream.map(() => undefined),
      // LISTEN never ends while the process lives: an end is a lost connection, re-opened by the engine.
      Stream.concat(
        Stream.fail(new SqlError({ cause: new Error("LISTEN ended"), message: "the commit-hint listener ended" }))
      ),
      // Down (lost, or stopped): foreign commits go unhinted until it is up again, so every read looks
      // until then; its re-open's wake-up above marks the horizons unsure.
      Stream.ensuring(
        Effect.sync(() => {
          known.listening = false
        })
      )
    ),
    notifyOthers: Effect.flatMap(SqlClient, (sql) => Effect.asVoid(sql`SELECT pg_notify(${channel}, ${self})`)),
    skipLocked: "FOR UPDATE SKIP LOCKED",
    claimAlone: Effect.flatMap(SqlClient, (sql) =>
      Effect.map(
        sql.unsafe<{ alone: boolean; events_top: string | number | null; outbox_top: string | number | null }>(
          CommitHorizon.WRITERS_ALONE,
          [writers]
        ),
        (rows) => {
          const row = rows[0]
          return row?.alone === true
            ? { events: Number(row.events_top ?? 0), outbox: Number(row.outbox_top ?? 0) }
            : undefined
        }
      )
    ),
    // Held by a session of its own kept for the process's lifetime: a crashed process's connection
    // closes and PostgreSQL releases the lock, so a restart under the same id gets it at once.
    holdNodeId: (nodeId) =>
      PgSessions.holdLock(
        { ...sessions, applicationName: `${sessions.applicationName}:node-id` },
        lockKey(`node:${nodeId}`),
        nodeId,
        onNodeIdLost
      )
  }
}

/** SqlClient (and PgClient) for one PostgreSQL schema, with the PostgreSQL StoreBackend. */
export const layer = (options: PostgresStoreOptions): Layer.Layer<SqlClient | PgClient.PgClient, StorageFailure> => {
  const schema = options.schema ?? "public"
  if (!IDENTIFIER.test(schema)) throw new Error(`schema '${schema}' must be a lower-case SQL identifier`)
  const url = schema === "public" ? options.url : withSearchPath(options.url, schema)
  const client = PgClient.layer({
    url: Redacted.make(url),
    types,
    maxConnections: options.maxConnections ?? 10,
    applicationName: options.applicationName ?? "orchestration-engine"
  })
  // Under a lock: processes started together on a new database race in CREATE SCHEMA IF NOT EXISTS
  // (it checks, then inserts), and the loser fails on pg_namespace's unique index.
  const ensureSchema = Layer.effectDiscard(
    Effect.flatMap(SqlClient, (sql) =>
      schema === "public"
        ? Effect.void
        : sql.withTransaction(
            Effect.zipRight(
              sql`SELECT pg_advisory_xact_lock(hashtext(${`orchestration:${schema}:create-schema`}))`,
              Effect.asVoid(sql.unsafe(`CREATE SCHEMA IF NOT EXISTS ${schema}`))
            )
          )
    )
  )
  const sessions = { url, applicationName: options.applicationName ?? "orchestration-engine" }
  const backend = Layer.succeed(
    StoreBackend,
    makeBackend(sessions, schema, options.onNodeIdLost ?? endProcess, options.appendLock ?? false)
  )
  return Layer.mergeAll(backend, ensureSchema).pipe(
    Layer.provideMerge(client),
    Layer.mapError(toStorageFailure("open: postgres"))
  ) as Layer.Layer<SqlClient | PgClient.PgClient, StorageFailure>
}
