/**
 * The floor: raw better-sqlite3 doing exactly the writes one engine command costs (receipt lookup,
 * event insert, projection upsert, receipt insert, outbox insert) on the engine's own table shapes
 * and pragmas (WAL, synchronous=FULL, exclusive lock). Nothing the engine adds (validation, queue,
 * fibers, savepoints, JSON) is here, so engine ÷ floor is the price of the engine itself.
 */
import Database from "better-sqlite3"
import { join } from "node:path"
import { nowMs, type RunResult } from "./Stats.js"

export const floorSchema = `
CREATE TABLE events (sequence INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL UNIQUE, aggregate_type TEXT NOT NULL,
  aggregate_id TEXT NOT NULL, version INTEGER NOT NULL, type TEXT NOT NULL, schema_version INTEGER NOT NULL, payload TEXT NOT NULL,
  command_id TEXT NOT NULL, occurred_at INTEGER NOT NULL, UNIQUE (aggregate_type, aggregate_id, version));
CREATE INDEX events_by_aggregate_id ON events (aggregate_id, sequence);
CREATE INDEX events_by_command ON events (command_id);
CREATE TABLE receipts (command_id TEXT PRIMARY KEY, aggregate_type TEXT NOT NULL, aggregate_id TEXT NOT NULL, command_type TEXT NOT NULL,
  fingerprint TEXT NOT NULL, status TEXT NOT NULL, first_sequence INTEGER, last_sequence INTEGER NOT NULL, effect_ids TEXT NOT NULL,
  rejection TEXT, accepted_at INTEGER NOT NULL);
CREATE INDEX receipts_by_time ON receipts (accepted_at);
CREATE TABLE outbox (sequence INTEGER PRIMARY KEY AUTOINCREMENT, effect_id TEXT NOT NULL UNIQUE, command_id TEXT NOT NULL,
  aggregate_type TEXT NOT NULL, aggregate_id TEXT NOT NULL, kind TEXT NOT NULL, payload TEXT NOT NULL, lane TEXT NOT NULL,
  status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, available_at INTEGER NOT NULL, lease_owner TEXT, lease_expires_at INTEGER,
  response TEXT, error TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
CREATE INDEX outbox_by_status_kind ON outbox (status, kind, sequence);
CREATE INDEX outbox_by_lane ON outbox (lane, sequence);
CREATE INDEX outbox_by_aggregate ON outbox (aggregate_id, sequence);
CREATE INDEX outbox_running_lease ON outbox (status, lease_expires_at);
CREATE TABLE bench_counters (counter_id TEXT PRIMARY KEY, total INTEGER NOT NULL, updated_seq INTEGER NOT NULL);
`

/** Runs `ops` commands, `batch` per transaction (1 = one transaction per command). */
export const runFloor = (dir: string, ops: number, batch: number): RunResult => {
  const db = new Database(join(dir, "floor.db"))
  try {
    db.pragma("locking_mode = EXCLUSIVE")
    db.pragma("journal_mode = WAL")
    db.pragma("synchronous = FULL")
    db.exec(floorSchema)
    const findReceipt = db.prepare("SELECT * FROM receipts WHERE command_id = ?")
    const insertEvent =
      db.prepare(`INSERT INTO events (event_id, aggregate_type, aggregate_id, version, type, schema_version, payload, command_id, occurred_at)
      VALUES (?, 'counter', ?, ?, 'counter.bumped', 1, ?, ?, ?) RETURNING sequence`)
    const upsert = db.prepare(`INSERT INTO bench_counters (counter_id, total, updated_seq) VALUES (?, 1, ?)
      ON CONFLICT (counter_id) DO UPDATE SET total = total + 1, updated_seq = excluded.updated_seq`)
    const insertReceipt =
      db.prepare(`INSERT INTO receipts (command_id, aggregate_type, aggregate_id, command_type, fingerprint, status,
      first_sequence, last_sequence, effect_ids, rejection, accepted_at) VALUES (?, 'counter', ?, 'counter.bump', ?, 'accepted', ?, ?, ?, NULL, ?)`)
    const insertOutbox =
      db.prepare(`INSERT INTO outbox (effect_id, command_id, aggregate_type, aggregate_id, kind, payload, lane, status,
      attempts, available_at, created_at, updated_at) VALUES (?, ?, 'counter', ?, 'bench.effect', ?, ?, 'pending', 0, ?, ?, ?)
      ON CONFLICT (effect_id) DO NOTHING`)
    const versions = new Map<string, number>()
    const command = (i: number) => {
      const commandId = `cmd-${i}`
      const aggregateId = `c-${i % 16}`
      const now = Date.now()
      if (findReceipt.get(commandId) !== undefined) throw new Error(`floor: receipt ${commandId} already exists`)
      const version = (versions.get(aggregateId) ?? 0) + 1
      versions.set(aggregateId, version)
      const { sequence } = insertEvent.get(
        `${commandId}/e0`,
        aggregateId,
        version,
        JSON.stringify({ type: "counter.bumped", by: 1 }),
        commandId,
        now
      ) as {
        sequence: number
      }
      upsert.run(aggregateId, sequence)
      const effectId = `${commandId}:0`
      insertReceipt.run(commandId, aggregateId, `fp-${i}`, sequence, sequence, JSON.stringify([effectId]), now)
      insertOutbox.run(
        effectId,
        commandId,
        aggregateId,
        JSON.stringify({ n: i }),
        `counter:${aggregateId}`,
        now,
        now,
        now
      )
    }
    const transaction = db.transaction((from: number, to: number) => {
      for (let i = from; i < to; i++) command(i)
    })
    const latencies: Array<number> = []
    const start = nowMs()
    for (let from = 0; from < ops; from += batch) {
      const t0 = nowMs()
      transaction(from, Math.min(ops, from + batch))
      latencies.push(nowMs() - t0)
    }
    return { ops, seconds: (nowMs() - start) / 1000, latenciesMs: latencies }
  } finally {
    db.close()
  }
}
