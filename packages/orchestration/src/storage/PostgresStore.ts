/**
 * Opening the shared store: PostgreSQL through @effect/sql-pg, for several server processes on one
 * database. The engine's SQL is the same as on SQLite; what differs lives in the StoreBackend this
 * layer provides (see StoreBackend.ts): the append lock, LISTEN/NOTIFY hints, SKIP LOCKED claims,
 * node-id locks and cross-process migrations.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted, Stream } from "effect"
import { randomUUID } from "node:crypto"
import pg from "pg"
import type { NodeIdInUse, StorageFailure } from "../Errors.js"
import * as Receipts from "../Receipts.js"
import * as PgSessions from "./PgSessions.js"
import { StoreBackend, type ForeignCommits, type StoreBackendShape } from "./StoreBackend.js"
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
  onNodeIdLost: (error: NodeIdInUse) => Effect.Effect<void>
): StoreBackendShape => {
  const channel = `orchestration_${schema}`
  // Our own notifications come back to us too; our commits already rang locally, so they are skipped.
  const self = randomUUID()
  const lockKey = (name: string) => `orchestration:${schema}:${name}`
  return {
    dialect: "postgres",
    beginWrite: "BEGIN",
    shared: true,
    beginBatch: (knownHead, commandIds) =>
      Effect.gen(function* () {
        const sql = yield* SqlClient
        // The append lock, held to COMMIT, and the hint to other processes, delivered at COMMIT (a
        // rolled-back batch notifies nobody). Its own statement: a statement's snapshot is taken when
        // it starts, so reads in the statement that waited for the lock would miss the commit waited for.
        yield* sql`SELECT pg_advisory_xact_lock(hashtext(${lockKey("append")})), pg_notify(${channel}, ${self})`
        // One round trip for both reads: the batch's receipts, and what other processes committed.
        const rows = yield* sql<Receipts.ReceiptRow & { last: number | null }>`
          SELECT r.*, NULL::bigint AS last FROM receipts r WHERE ${sql.in("r.command_id", commandIds)}
          UNION ALL
          SELECT NULL, aggregate_type, aggregate_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, MAX(sequence)
          FROM events WHERE sequence > ${knownHead} GROUP BY aggregate_type, aggregate_id`
        const receipts = new Map<string, Receipts.Receipt>()
        const aggregates: Array<ForeignCommits["aggregates"][number]> = []
        let head = knownHead
        for (const row of rows) {
          if (row.last === null) receipts.set(row.command_id, Receipts.toReceipt(row))
          else {
            aggregates.push({ aggregateType: row.aggregate_type, aggregateId: row.aggregate_id })
            head = Math.max(head, Number(row.last))
          }
        }
        const foreign = aggregates.length === 0 ? undefined : ({ head, aggregates } satisfies ForeignCommits)
        return { foreign, receipts }
      }),
    orderedWithDispatch: <A, E, R>(body: Effect.Effect<A, E, R>) =>
      Effect.flatMap(SqlClient, (sql) =>
        sql.withTransaction(
          // Waits for an open dispatch to commit; the body's statements then read fresh snapshots.
          Effect.zipRight(sql`SELECT pg_advisory_xact_lock(hashtext(${lockKey("append")}))`, body)
        )
      ),
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
      Stream.filter((from) => from !== self),
      Stream.map(() => undefined),
      // LISTEN never ends while the process lives: an end is a lost connection, re-opened by the engine.
      Stream.concat(
        Stream.fail(new SqlError({ cause: new Error("LISTEN ended"), message: "the commit-hint listener ended" }))
      )
    ),
    notifyOthers: Effect.flatMap(SqlClient, (sql) => Effect.asVoid(sql`SELECT pg_notify(${channel}, ${self})`)),
    skipLocked: "FOR UPDATE SKIP LOCKED",
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
  const ensureSchema = Layer.effectDiscard(
    Effect.flatMap(SqlClient, (sql) =>
      schema === "public" ? Effect.void : Effect.asVoid(sql.unsafe(`CREATE SCHEMA IF NOT EXISTS ${schema}`))
    )
  )
  const sessions = { url, applicationName: options.applicationName ?? "orchestration-engine" }
  const backend = Layer.succeed(StoreBackend, makeBackend(sessions, schema, options.onNodeIdLost ?? endProcess))
  return Layer.mergeAll(backend, ensureSchema).pipe(
    Layer.provideMerge(client),
    Layer.mapError(toStorageFailure("open: postgres"))
  ) as Layer.Layer<SqlClient | PgClient.PgClient, StorageFailure>
}
