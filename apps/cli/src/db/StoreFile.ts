/**
 * The engine's SQLite file, opened by the CLI while the server is down. A running server holds the
 * file EXCLUSIVE (SqliteStore.ts), so the first read here fails at once with SQLITE_BUSY: that is
 * how "the server is running on this store" is told apart from every other failure. The file is
 * opened read-write only so SQLite can recover a WAL left by a killed server; nothing is written
 * (`db check` also sets `query_only`, so SQLite itself refuses a write).
 */
import { StorageErrors } from "@orchestration/engine"
import Database from "better-sqlite3"
import { Effect, type Scope } from "effect"
import { existsSync } from "node:fs"
import { join, resolve } from "node:path"
import { NotFound, StoreBusy, StoreFailed, UsageError } from "../CliErrors.js"

export type Store = Database.Database

/** `--db <file>` wins; else `<data dir>/engine.db` as the server lays it out (DATA_DIR, default ./data). */
export const fileOf = (options: { readonly db: string | undefined; readonly dataDir: string }) =>
  options.db !== undefined ? resolve(options.db) : join(resolve(options.dataDir), "engine.db")

/** The driver's code, or "" when the error carries none. */
const codeOf = (error: unknown): string => {
  const code = StorageErrors.codeOf(error)
  return code === "UNKNOWN" ? "" : code
}

/** Any SQLite failure on this file as a CliError: busy means a server holds it. */
export const failure =
  (file: string, doing: string) =>
  (error: unknown): StoreBusy | StoreFailed => {
    const code = codeOf(error)
    if (StorageErrors.isLockedCode(code)) {
      return new StoreBusy({ file, message: `the server is running on this store (${file} is locked); stop it first` })
    }
    const message = error instanceof Error ? error.message : String(error)
    return new StoreFailed({ file, message: `${doing} ${file} failed${code === "" ? "" : ` (${code})`}: ${message}` })
  }

const engineTables = ["events", "receipts", "outbox"]

/** Opens the store for reading in the current scope; closed when the scope ends. */
export const open = (file: string): Effect.Effect<Store, NotFound | StoreBusy | StoreFailed, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.gen(function* () {
      if (!existsSync(file)) return yield* new NotFound({ message: `no database at ${file} (use --data-dir or --db)` })
      const store = yield* Effect.try({
        // timeout 0: a locked file answers SQLITE_BUSY at once instead of after 5 s of waiting.
        try: () => new Database(file, { fileMustExist: true, timeout: 0 }),
        catch: failure(file, "opening")
      })
      const tables = yield* Effect.try({
        try: () =>
          (store.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as Array<{ name: string }>).map(
            (t) => t.name
          ),
        catch: failure(file, "reading")
      }).pipe(Effect.tapError(() => Effect.sync(() => store.close())))
      const missing = engineTables.filter((t) => !tables.includes(t))
      if (missing.length > 0) {
        store.close()
        return yield* new StoreFailed({
          file,
          message: `${file} is not an engine store (no ${missing.join(", ")} table)`
        })
      }
      return store
    }),
    (store) => Effect.sync(() => store.close())
  )

/** Runs a synchronous read against the store; SQLite errors become CliErrors. */
export const read = <A>(store: Store, doing: string, f: (store: Store) => A) =>
  Effect.try({ try: () => f(store), catch: failure(store.name, doing) })

export const hasTable = (store: Store, name: string) =>
  store.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined

/** `db backup` refuses to overwrite unless told to. */
export const checkTarget = (target: string, source: string, force: boolean) =>
  Effect.gen(function* () {
    if (resolve(target) === resolve(source))
      return yield* new UsageError({ message: "the backup file cannot be the database itself" })
    if (existsSync(target) && !force)
      return yield* new UsageError({ message: `${target} exists; choose another file or pass --force` })
  })
