/**
 * The engine's own tables, numbered. Domain read models are created by their projections' `setup`.
 * Timestamps are epoch milliseconds; JSON columns hold canonical encodings.
 *
 * A migration is history: one that has shipped is never edited (existing stores ran it), the next
 * change is a new one. The columns a table has today are stated by its module (EventLog, Outbox,
 * Receipts: `columns` and `insertShape`), which every writer builds from; test/table-columns.test.ts
 * fails when a migration and its module disagree.
 */
import * as Migrator from "@effect/sql/Migrator"
import * as StreamChunks from "../StreamChunks.js"
import * as Timers from "../Timers.js"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * One logical schema, two dialects: SQLite's INTEGER is 64-bit, PostgreSQL's is not, so counters,
 * sequences and epoch milliseconds are BIGINT there, and sequences come from BIGSERIAL.
 */
const columnTypes = (sql: SqlClient) =>
  sql.onDialectOrElse({
    pg: () => ({ serial: "BIGSERIAL PRIMARY KEY", int: "BIGINT" }),
    orElse: () => ({ serial: "INTEGER PRIMARY KEY AUTOINCREMENT", int: "INTEGER" })
  })

/**
 * The outbox's columns as 0001 created them; 0003 rebuilds the table (SQLite) from the same list with
 * a wider status CHECK and one more column.
 */
const outboxColumns = (t: ReturnType<typeof columnTypes>, statuses: string) => [
  `sequence ${t.serial}`,
  "effect_id TEXT NOT NULL UNIQUE",
  "command_id TEXT NOT NULL",
  "aggregate_type TEXT NOT NULL",
  "aggregate_id TEXT NOT NULL",
  "kind TEXT NOT NULL",
  "payload TEXT NOT NULL",
  "lane TEXT NOT NULL",
  `status TEXT NOT NULL CHECK (status IN (${statuses}))`,
  `attempts ${t.int} NOT NULL DEFAULT 0`,
  `available_at ${t.int} NOT NULL`,
  "lease_owner TEXT",
  `lease_expires_at ${t.int}`,
  "response TEXT",
  "error TEXT",
  `created_at ${t.int} NOT NULL`,
  `updated_at ${t.int} NOT NULL`
]

/**
 * `CREATE TABLE name (…)`, one definition a line, laid out as the shipped statement was: a migration's
 * text never changes once it ran (SQLite keeps each table's CREATE text as written).
 */
const createTable = (name: string, definitions: ReadonlyArray<string>, indent: string) =>
  `CREATE TABLE ${name} (\n${indent}  ${definitions.join(`,\n${indent}  `)}\n${indent})`

const init = Effect.gen(function* () {
  const sql = yield* SqlClient
  const t = columnTypes(sql)
  yield* sql.unsafe(`CREATE TABLE events (
    sequence ${t.serial},
    event_id TEXT NOT NULL UNIQUE,
    aggregate_type TEXT NOT NULL,
    aggregate_id TEXT NOT NULL,
    version ${t.int} NOT NULL,
    type TEXT NOT NULL,
    schema_version ${t.int} NOT NULL,
    payload TEXT NOT NULL,
    command_id TEXT NOT NULL,
    occurred_at ${t.int} NOT NULL,
    UNIQUE (aggregate_type, aggregate_id, version)
  )`)
  yield* sql`CREATE INDEX events_by_aggregate_id ON events (aggregate_id, sequence)`
  yield* sql`CREATE INDEX events_by_command ON events (command_id)`
  yield* sql.unsafe(`CREATE TABLE receipts (
    command_id TEXT PRIMARY KEY,
    aggregate_type TEXT NOT NULL,
    aggregate_id TEXT NOT NULL,
    command_type TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('accepted', 'rejected')),
    first_sequence ${t.int},
    last_sequence ${t.int} NOT NULL,
    effect_ids TEXT NOT NULL,
    rejection TEXT,
    accepted_at ${t.int} NOT NULL
  )`)
  yield* sql`CREATE INDEX receipts_by_time ON receipts (accepted_at)`
  yield* sql.unsafe(
    createTable("outbox", outboxColumns(t, "'pending', 'running', 'succeeded', 'failed', 'cancelled'"), "  ")
  )
  yield* sql`CREATE INDEX outbox_by_status_kind ON outbox (status, kind, sequence)`
  yield* sql`CREATE INDEX outbox_by_lane ON outbox (lane, sequence)`
  yield* sql`CREATE INDEX outbox_by_aggregate ON outbox (aggregate_id, sequence)`
})

const reactors = Effect.gen(function* () {
  const sql = yield* SqlClient
  const t = columnTypes(sql)
  yield* sql.unsafe(`CREATE TABLE reactor_cursors (
    reactor TEXT PRIMARY KEY,
    position ${t.int} NOT NULL,
    updated_at ${t.int} NOT NULL
  )`)
  yield* sql.unsafe(`CREATE TABLE owners (
    owner_id TEXT PRIMARY KEY,
    node_id TEXT NOT NULL,
    started_at ${t.int} NOT NULL,
    heartbeat_at ${t.int} NOT NULL,
    stopped_at ${t.int}
  )`)
  yield* sql`CREATE INDEX outbox_running_lease ON outbox (status, lease_expires_at)`
})

/**
 * Quarantine: a row whose settlement its owning aggregate cannot record is parked with status
 * `quarantined` and a stored record (reason, message, the settlement it could not record). SQLite
 * cannot change a CHECK constraint in place, so the table is rebuilt; its AUTOINCREMENT high-water
 * mark is carried over, because a sequence handed out again could sit below a reactor's cursor.
 */
const outboxStatuses = "'pending', 'running', 'succeeded', 'failed', 'cancelled', 'quarantined'"

const quarantine = Effect.gen(function* () {
  const sql = yield* SqlClient
  const t = columnTypes(sql)
  yield* sql.onDialectOrElse({
    pg: () =>
      Effect.gen(function* () {
        yield* sql.unsafe(`ALTER TABLE outbox DROP CONSTRAINT outbox_status_check`)
        yield* sql.unsafe(`ALTER TABLE outbox ADD CONSTRAINT outbox_status_check CHECK (status IN (${outboxStatuses}))`)
        yield* sql.unsafe(`ALTER TABLE outbox ADD COLUMN quarantine TEXT`)
      }),
    orElse: () =>
      Effect.gen(function* () {
        const definitions = outboxColumns(t, outboxStatuses)
        const columns = definitions.map((definition) => definition.split(" ")[0]).join(", ")
        const [mark] = yield* sql<{ seq: number | null }>`SELECT MAX(seq) AS seq FROM (
          SELECT seq FROM sqlite_sequence WHERE name = 'outbox' UNION ALL SELECT MAX(sequence) FROM outbox)`
        yield* sql.unsafe(createTable("outbox_next", [...definitions, "quarantine TEXT"], "        "))
        yield* sql.unsafe(`INSERT INTO outbox_next (${columns}) SELECT ${columns} FROM outbox`)
        yield* sql.unsafe(`DROP TABLE outbox`)
        yield* sql.unsafe(`ALTER TABLE outbox_next RENAME TO outbox`)
        yield* sql`CREATE INDEX outbox_by_status_kind ON outbox (status, kind, sequence)`
        yield* sql`CREATE INDEX outbox_by_lane ON outbox (lane, sequence)`
        yield* sql`CREATE INDEX outbox_by_aggregate ON outbox (aggregate_id, sequence)`
        yield* sql`CREATE INDEX outbox_running_lease ON outbox (status, lease_expires_at)`
        yield* sql`DELETE FROM sqlite_sequence WHERE name IN ('outbox', 'outbox_next')`
        if (mark?.seq !== null && mark?.seq !== undefined) {
          yield* sql`INSERT INTO sqlite_sequence (name, seq) VALUES ('outbox', ${Number(mark.seq)})`
        }
      })
  })
})

/** Operator actions applied to a row: part of the default operator command id (EffectOutcomes.operatorId). */
const operatorActions = Effect.gen(function* () {
  const sql = yield* SqlClient
  const t = columnTypes(sql)
  yield* sql.unsafe(`ALTER TABLE outbox ADD COLUMN operator_actions ${t.int} NOT NULL DEFAULT 0`)
})

/**
 * Indexes that keep settled history out of the reactors' and retention's reads. The claim's lane check
 * (is there an earlier unsettled row of this lane?) walked `outbox_by_lane` over every earlier row of
 * the lane, settled ones included, so a long-lived lane (one thread's effects) paid for its whole
 * history on every claim; the partial index holds unsettled rows only. `outbox_running_lease` held an
 * entry for every row ever written; `outbox_running` holds the running rows in sequence order, so the
 * dead-owner sweeps (reconcile's pages) read 500 rows without sorting every running row first (13 ms a
 * page at 10,000 running rows), and lease expiry reads running rows only. Retention's sweep had no
 * index on `updated_at` and walked every settled row each round (≈ 180–340 ms at 10⁶ settled rows, on
 * the store's one connection); `outbox_settled_by_time` serves it (Retention.pruneOnce). The partial
 * indexes' WHERE is written exactly as their queries state it, so both planners match them.
 */
const unsettledIndexes = Effect.gen(function* () {
  const sql = yield* SqlClient
  yield* sql`DROP INDEX outbox_by_lane`
  yield* sql.unsafe(
    "CREATE INDEX outbox_unsettled_by_lane ON outbox (lane, sequence) WHERE status IN ('pending', 'running', 'quarantined')"
  )
  yield* sql`DROP INDEX outbox_running_lease`
  yield* sql.unsafe("CREATE INDEX outbox_running ON outbox (status, sequence) WHERE status = 'running'")
  yield* sql.unsafe(
    "CREATE INDEX outbox_settled_by_time ON outbox (status, updated_at) WHERE status IN ('succeeded', 'failed', 'cancelled')"
  )
})

export const engineMigrations = Migrator.fromRecord({
  "0001_init": init,
  "0002_reactors": reactors,
  "0003_quarantine": quarantine,
  "0004_operator_actions": operatorActions,
  "0005_timers": Timers.createTable,
  "0006_stream_chunks": StreamChunks.createTable,
  "0007_stream_channels": StreamChunks.addChannels,
  "0008_unsettled_indexes": unsettledIndexes,
  "0009_timer_attempts": Timers.addAttempts,
  "0010_timer_failures": Timers.addFailures
})

/** Runs the engine's pending migrations. Avoids SqliteMigrator's schema dump (it shells out). */
export const migrate = Migrator.make({})({ loader: engineMigrations })
