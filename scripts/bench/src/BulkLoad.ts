/**
 * Writes `rows` commands' worth of engine rows (event, receipt, outbox row, read-model row) straight
 * through SQLite into a store whose schema the engine created. Dispatching them would take minutes at
 * 10⁵–10⁶ rows and measure nothing new; what matters for scale and recovery is that they are there.
 */
import Database from "better-sqlite3"
import { Effect, Layer } from "effect"
import { effectKind } from "./BenchDomain.js"
import { engineLayer, runBench, storeFile } from "./EngineStack.js"

export interface BulkOptions {
  /** `succeeded`: settled history. `running`: claimed by `deadOwner`, which is gone. */
  readonly outboxStatus: "succeeded" | "running"
  readonly deadOwner?: string
}

/** Lets the engine create its schema (migrations, projection tables) and closes it again. */
export const createSchema = (dir: string) => runBench(Layer.build(engineLayer(dir)).pipe(Effect.asVoid))

export const bulkLoad = (dir: string, rows: number, options: BulkOptions) => {
  const db = new Database(storeFile(dir))
  try {
    db.pragma("journal_mode = WAL")
    // Loading is setup, not measurement: durability of the loader's commits does not matter.
    db.pragma("synchronous = NORMAL")
    const event =
      db.prepare(`INSERT INTO events (event_id, aggregate_type, aggregate_id, version, type, schema_version, payload, command_id, occurred_at)
      VALUES (?, 'counter', ?, 1, 'counter.bumped', 1, ?, ?, ?)`)
    const receipt =
      db.prepare(`INSERT INTO receipts (command_id, aggregate_type, aggregate_id, command_type, fingerprint, status, first_sequence,
      last_sequence, effect_ids, rejection, accepted_at) VALUES (?, 'counter', ?, 'counter.bump', ?, 'accepted', ?, ?, ?, NULL, ?)`)
    const outbox =
      db.prepare(`INSERT INTO outbox (effect_id, command_id, aggregate_type, aggregate_id, kind, payload, lane, status, attempts,
      available_at, lease_owner, lease_expires_at, response, created_at, updated_at) VALUES (?, ?, 'counter', ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)`)
    const counter = db.prepare("INSERT INTO bench_counters (counter_id, total, updated_seq) VALUES (?, 1, ?)")
    const running = options.outboxStatus === "running"
    const load = db.transaction((from: number, to: number) => {
      const now = Date.now()
      for (let i = from; i < to; i++) {
        const commandId = `hist-${i}`
        // One aggregate (and so one lane) per row, as many independent commands would leave.
        const aggregateId = `h-${i}`
        const sequence = Number(
          event.run(`${commandId}/e0`, aggregateId, JSON.stringify({ type: "counter.bumped", n: i }), commandId, now)
            .lastInsertRowid
        )
        receipt.run(commandId, aggregateId, `fp-${i}`, sequence, sequence, JSON.stringify([`${commandId}:0`]), now)
        outbox.run(
          `${commandId}:0`,
          commandId,
          aggregateId,
          effectKind,
          JSON.stringify({ n: i }),
          `counter:${aggregateId}`,
          options.outboxStatus,
          now,
          running ? (options.deadOwner ?? "dead-owner") : null,
          running ? now + 60_000 : null,
          running ? null : '{"ok":true}',
          now,
          now
        )
        counter.run(aggregateId, sequence)
      }
    })
    for (let from = 0; from < rows; from += 50_000) load(from, Math.min(rows, from + 50_000))
    db.pragma("wal_checkpoint(TRUNCATE)")
  } finally {
    db.close()
  }
}
