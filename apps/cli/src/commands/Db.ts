/**
 * `orchestrator db check|backup`: offline work on the SQLite store while the server is down. A
 * running server holds the file locked: both commands then stop with exit 6 and say so.
 */
import { Args, Command, Options } from "@effect/cli"
import { SqliteClient } from "@orchestration/engine"
import { Config } from "@orchestration/server"
import { Clock, Effect, Option } from "effect"
import { existsSync, statSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { ProblemsFound, UsageError } from "../CliErrors.js"
import * as Check from "../db/Check.js"
import * as StoreFile from "../db/StoreFile.js"
import * as Progress from "../Progress.js"
import * as Render from "../Render.js"

const storeOptions = {
  dataDir: Options.directory("data-dir", { exists: "either" }).pipe(
    Options.withDescription(
      "The server's data directory (DATA_DIR); the store is <data-dir>/engine.db. Default: $DATA_DIR, else ./data."
    ),
    Options.optional
  ),
  db: Options.file("db").pipe(
    Options.withDescription("The SQLite file itself (overrides --data-dir)."),
    Options.optional
  ),
  progress: Options.boolean("progress").pipe(
    Options.withDescription(
      "Draw the progress bar on stderr even when it is not a terminal (on a terminal it is drawn for large stores)."
    )
  )
}

const storeFile = (options: { readonly dataDir: Option.Option<string>; readonly db: Option.Option<string> }) =>
  Effect.gen(function* () {
    // A server configured with DATABASE_URL keeps its store in PostgreSQL: there is no file to read.
    const places = Config.storePlaces(process.env)
    if (Option.isNone(options.db) && Option.isNone(options.dataDir) && places.databaseUrl !== undefined) {
      return yield* new UsageError({
        message:
          "db commands read the SQLite store, and DATABASE_URL points at PostgreSQL; use its own tools (pg_dump), or pass --db <file>"
      })
    }
    return StoreFile.fileOf({
      db: Option.getOrUndefined(options.db),
      dataDir: Option.getOrElse(options.dataDir, () => places.dataDir)
    })
  })

/**
 * The agents domain's world directory, whose ledger `db check` reads: `--world-dir`, else $WORLD_DIR,
 * else `world` next to the store file (where the server puts it under DATA_DIR). None found: the
 * ledger is not checked (another domain, or a store copied without its world).
 */
const worldDirOf = (option: Option.Option<string>, file: string) =>
  Effect.gen(function* () {
    if (Option.isSome(option)) {
      const dir = resolve(option.value)
      if (!existsSync(dir)) return yield* new UsageError({ message: `--world-dir: no directory at ${dir}` })
      return dir
    }
    const dir = Config.storePlaces(process.env).worldDirFromEnv ?? join(dirname(resolve(file)), "world")
    return existsSync(dir) ? dir : undefined
  })

export const renderCheck = (report: Check.CheckReport): string => {
  const c = report.counts
  const summary = Render.fields([
    ["events", `${c.events} (log head ${c.head}, ${c.aggregates} aggregates)`],
    ["receipts", String(c.receipts)],
    ["effects", `${c.effects} (${c.settledEffects} settled)`],
    ["transcripts", c.transcripts === null ? "none in this store" : String(c.transcripts)],
    [
      "world",
      report.world === null
        ? "none found (the ledger is not checked)"
        : `${report.world.dir} (${report.world.ledgerEntries} ledger entries)`
    ]
  ])
  const verdict = report.ok
    ? "ok: no problems found"
    : `${report.problems.length} problem(s) found\n\n` +
      Render.table(
        ["CHECK", "SUBJECT", "PROBLEM"],
        report.problems.map((p) => [p.check, p.subject, p.message])
      )
  return `db check ${report.file}\n${summary}\n\n${verdict}`
}

const worldDirOption = Options.directory("world-dir", { exists: "either" }).pipe(
  Options.withDescription(
    "The agents world directory (WORLD_DIR), whose ledger.jsonl is checked for process-bound effects performed twice. " +
      "Default: $WORLD_DIR, else 'world' next to the store file when it exists."
  ),
  Options.optional
)

const check = Command.make(
  "check",
  {
    ...storeOptions,
    worldDir: worldDirOption,
    json: Options.boolean("json").pipe(Options.withDescription("Print the report as JSON."))
  },
  (options) =>
    Effect.scoped(
      Effect.gen(function* () {
        const file = yield* storeFile(options)
        const worldDir = yield* worldDirOf(options.worldDir, file)
        const store = yield* StoreFile.open(file)
        // The check only reads: SQLite refuses any write on this connection (a WAL left by a killed
        // server is still recovered), whatever the audit's queries become.
        yield* StoreFile.read(store, "opening", (s) => s.pragma("query_only = ON"))
        // One read transaction: a consistent snapshot, and a server cannot take the file meanwhile.
        yield* Effect.acquireRelease(
          StoreFile.read(store, "beginning a read of", (s) => s.exec("BEGIN")),
          () => Effect.sync(() => store.exec("COMMIT"))
        )
        const now = yield* Clock.currentTimeMillis
        // The engine's audit over this connection, through the engine's own SqlClient.
        const report = yield* Check.run({
          file,
          now,
          worldDir,
          progress: (total) => Progress.make({ label: "checking", total, unit: "rows", forced: options.progress })
        }).pipe(
          Effect.catchTag("SqlError", (error) => Effect.fail(StoreFile.failure(file, "checking")(error.cause))),
          Effect.provide(SqliteClient.layerOver(store))
        )
        yield* Render.output(options.json, report, renderCheck)
        if (!report.ok)
          return yield* new ProblemsFound({
            count: report.problems.length,
            message: `${report.problems.length} problem(s) found`
          })
      })
    )
).pipe(
  Command.withDescription(
    "Check the store's invariants offline: event sequence gaps, receipts without their events, events without receipts, " +
      "settled effects whose owner never heard the outcome, invalid transcripts, process-bound effects performed twice (the world's ledger). " +
      "Exit 0 when clean, 1 when problems are found."
  )
)

const backup = Command.make(
  "backup",
  {
    ...storeOptions,
    target: Args.path({ name: "file", exists: "either" }).pipe(
      Args.withDescription("Where to write the copy (a new SQLite file).")
    ),
    force: Options.boolean("force").pipe(Options.withDescription("Overwrite the file if it exists."))
  },
  (options) =>
    Effect.scoped(
      Effect.gen(function* () {
        const file = yield* storeFile(options)
        yield* StoreFile.checkTarget(options.target, file, options.force)
        const store = yield* StoreFile.open(file)
        const started = yield* Clock.currentTimeMillis
        let progress: Progress.Progress | undefined
        const pages = yield* Effect.tryPromise({
          // SQLite's online backup, a step of pages at a time; the callback reports how far it got.
          try: () =>
            store.backup(options.target, {
              progress: ({ totalPages, remainingPages }) => {
                progress ??= Progress.make({
                  label: "backing up",
                  total: totalPages,
                  unit: "pages",
                  forced: options.progress,
                  largeFrom: 25_000
                })
                progress.set(totalPages - remainingPages)
                return 1_000
              }
            }),
          catch: StoreFile.failure(file, "backing up")
        })
        progress?.finish()
        const elapsed = (yield* Clock.currentTimeMillis) - started
        const size = statSync(options.target).size
        yield* Render.print(
          `backed up ${file} to ${options.target}: ${pages.totalPages} pages, ${Render.bytes(size)} in ${Render.duration(elapsed)}`
        )
      })
    )
).pipe(
  Command.withDescription(
    "Copy the store with SQLite's online backup, with a progress bar. Check the copy with `db check --db <file>`."
  )
)

export const db = Command.make("db").pipe(
  Command.withDescription("Offline work on the SQLite store while the server is down (exit 6 when a server holds it)."),
  Command.withSubcommands([check, backup])
)
