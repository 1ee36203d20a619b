/**
 * Opening the embedded store. The pragmas the engine relies on are set explicitly (WAL,
 * synchronous, busy timeout, foreign keys) and the file is locked EXCLUSIVE for this process: the
 * design has one writer per store, and the lock is the kernel's, so it dies with a crashed process.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Cause, Context, Effect, Layer, Option } from "effect"
import { mkdirSync } from "node:fs"
import { dirname } from "node:path"
import { StoreLocked, type StorageFailure } from "../Errors.js"
import * as SqliteClient from "./SqliteClient.js"
import { SqliteConnection } from "./SqliteClient.js"
import { codeOf, isLockedCode, toStorageFailure } from "./StorageErrors.js"

export interface SqliteStoreOptions {
  /** A file path, or ":memory:" for tests that need no file. */
  readonly filename: string
  /** `FULL` (default) survives power loss; `NORMAL` only process loss. */
  readonly synchronous?: "FULL" | "NORMAL"
  readonly busyTimeoutMs?: number
}

const storeLocked = (filename: string) =>
  new StoreLocked({
    filename,
    message:
      `${filename} is held by another engine process; one engine writes a SQLite store at a time. ` +
      "Stop the other process or point this one at another data directory."
  })

const lockAndConfigure = (options: SqliteStoreOptions) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const file = options.filename !== ":memory:"
    const pragma = (statement: string) =>
      sql.unsafe(statement).pipe(Effect.mapError(toStorageFailure(`open: ${statement}`)))
    if (file) {
      // Order matters: with EXCLUSIVE set before WAL is entered, SQLite keeps the WAL index in
      // process memory and the first write lock is never released until the connection closes.
      yield* pragma("PRAGMA busy_timeout = 0")
      yield* pragma("PRAGMA locking_mode = EXCLUSIVE")
      yield* sql.unsafe("PRAGMA journal_mode = WAL").pipe(
        Effect.zipRight(sql.unsafe("BEGIN EXCLUSIVE")),
        Effect.zipRight(sql.unsafe("COMMIT")),
        Effect.catchAll((error): Effect.Effect<never, StoreLocked | StorageFailure> => {
          return isLockedCode(codeOf(error))
            ? Effect.fail(storeLocked(options.filename))
            : Effect.fail(toStorageFailure("open: lock")(error))
        })
      )
    }
    yield* pragma(`PRAGMA synchronous = ${options.synchronous ?? "FULL"}`)
    yield* pragma(`PRAGMA busy_timeout = ${options.busyTimeoutMs ?? 5000}`)
    yield* pragma("PRAGMA foreign_keys = ON")
    // Each command of a batch runs under a savepoint, and SQLite copies every page a savepoint first
    // touches into a statement journal. In a temp file that cost 25–35% more CPU per command than in
    // memory (measured on the floor's statements); the journal lives only until the savepoint ends.
    yield* pragma("PRAGMA temp_store = MEMORY")
  })

/**
 * Present only where the store is this process's alone: the file locked EXCLUSIVE here (or a
 * ":memory:" database, which no one else can open). SqliteConnection says only that the raw
 * connection is at hand; a SqliteClient.layer on a file another process also writes offers one too.
 * What relies on no other writer (TableChanges' count of this process's changes) asks for this.
 */
export class SqliteStoreLock extends Context.Tag("orchestration/SqliteStoreLock")<
  SqliteStoreLock,
  { readonly filename: string }
>() {}

const locked = (options: SqliteStoreOptions) =>
  Layer.effect(
    SqliteStoreLock,
    Effect.as(lockAndConfigure(options), SqliteStoreLock.of({ filename: options.filename }))
  )

/**
 * SqlClient for one SQLite store, locked for this process and configured, plus the raw connection
 * (SqliteConnection) that the processor's commit path uses when it is there.
 */
export { SqliteConnection }

export const layer = (
  options: SqliteStoreOptions
): Layer.Layer<SqlClient | SqliteConnection | SqliteStoreLock, StoreLocked | StorageFailure> => {
  if (options.filename !== ":memory:") mkdirSync(dirname(options.filename), { recursive: true })
  return locked(options).pipe(Layer.provideMerge(SqliteClient.layer({ filename: options.filename })))
}

/**
 * The same store over a SqlClient the application already has on `options.filename`, for example
 * @effect/sql-sqlite-node's: `SqliteStore.layerOver({ filename }, SqliteClient.layer({ filename }))`.
 * The file is locked and configured exactly as by `layer`; the engine then runs every statement
 * through that client (no SqliteConnection, so the generic commit path), which costs throughput
 * (docs/benchmarks.md, "engine dispatch over @effect/sql-sqlite-node"). The client must hold one
 * connection, as @effect/sql-sqlite-node's does: the lock is that connection's.
 *
 * That client switches the file to WAL while it opens, so a file another process holds refuses it
 * there, as a defect of the client's layer after the driver's 5 s busy wait; it is reported as the
 * same StoreLocked that `layer` gives.
 */
export const layerOver = <ROut, E, R>(
  options: SqliteStoreOptions,
  client: Layer.Layer<ROut, E, R>
): Layer.Layer<ROut | SqliteStoreLock, StoreLocked | StorageFailure | E, R | Exclude<SqlClient, ROut>> => {
  if (options.filename !== ":memory:") mkdirSync(dirname(options.filename), { recursive: true })
  const opened = Layer.catchAllCause(client, (cause): Layer.Layer<ROut, StoreLocked | E, R> => {
    const defect = Cause.dieOption(cause)
    return Option.isSome(defect) && isLockedCode(codeOf(defect.value))
      ? Layer.fail(storeLocked(options.filename))
      : Layer.failCause(cause)
  })
  return locked(options).pipe(Layer.provideMerge(opened))
}
