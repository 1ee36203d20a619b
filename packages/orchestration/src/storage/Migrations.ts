/**
 * The engine's own tables, numbered. Domain read models are created by their projections' `setup`.
 * Timestamps are epoch milliseconds; JSON columns hold canonical encodings.
 */
import * as Migrator from "@effect/sql/Migrator"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

const init = Effect.gen(function* () {
  const sql = yield* SqlClient
  yield* sql`CREATE TABLE events (
    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT NOT NULL UNIQUE,
    aggregate_type TEXT NOT NULL,
    aggregate_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    type TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    payload TEXT NOT NULL,
    command_id TEXT NOT NULL,
    occurred_at INTEGER NOT NULL,
    UNIQUE (aggregate_type, aggregate_id, version)
  )`
  yield* sql`CREATE INDEX events_by_aggregate_id ON events (aggregate_id, sequence)`
  yield* sql`CREATE INDEX events_by_command ON events (command_id)`
  yield* sql`CREATE TABLE receipts (
    command_id TEXT PRIMARY KEY,
    aggregate_type TEXT NOT NULL,
    aggregate_id TEXT NOT NULL,
    command_type TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('accepted', 'rejected')),
    first_sequence INTEGER,
    last_sequence INTEGER NOT NULL,
    effect_ids TEXT NOT NULL,
    rejection TEXT,
    accepted_at INTEGER NOT NULL
  )`
  yield* sql`CREATE INDEX receipts_by_time ON receipts (accepted_at)`
  yield* sql`CREATE TABLE outbox (
    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
    effect_id TEXT NOT NULL UNIQUE,
    command_id TEXT NOT NULL,
    aggregate_type TEXT NOT NULL,
    aggregate_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    lane TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'cancelled')),
    attempts INTEGER NOT NULL DEFAULT 0,
    available_at INTEGER NOT NULL,
    lease_owner TEXT,
    lease_expires_at INTEGER,
    response TEXT,
    error TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  )`
  yield* sql`CREATE INDEX outbox_by_status_kind ON outbox (status, kind, sequence)`
  yield* sql`CREATE INDEX outbox_by_lane ON outbox (lane, sequence)`
  yield* sql`CREATE INDEX outbox_by_aggregate ON outbox (aggregate_id, sequence)`
})

const reactors = Effect.gen(function* () {
  const sql = yield* SqlClient
  yield* sql`CREATE TABLE reactor_cursors (
    reactor TEXT PRIMARY KEY,
    position INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  )`
  yield* sql`CREATE TABLE owners (
    owner_id TEXT PRIMARY KEY,
    node_id TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    stopped_at INTEGER
  )`
  yield* sql`CREATE INDEX outbox_running_lease ON outbox (status, lease_expires_at)`
})

export const engineMigrations = Migrator.fromRecord({
  "0001_init": init,
  "0002_reactors": reactors
})

/** Runs the engine's pending migrations. Avoids SqliteMigrator's schema dump (it shells out). */
export const migrate = Migrator.make({})({ loader: engineMigrations })
