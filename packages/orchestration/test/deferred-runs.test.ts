/**
 * Deferred runs (Processor.ts): a batch's pure commands are decided at once and their events,
 * outbox rows and receipts written together (CommitWriter.writeCommands: one statement on
 * PostgreSQL), then their projections, set-based where a projection offers `applyMany`. A batch
 * must answer and write exactly what its commands dispatched one at a time do: the same sequences,
 * receipts (a rejection's and a no-event command's last sequence included), outbox rows, timers
 * and read model. Runs on both stores.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Schema } from "effect"
import { Aggregate, Decision, Engine, Projection } from "../src/index.js"
import { engineLayer, waitForQueueDepth } from "./fixtures/harness.js"

const Added = Aggregate.event("tally.added", { n: Schema.Number })
const Reminded = Aggregate.event("tally.reminded", { at: Schema.Number })

/** Events with an effect, a timer (written at once: not deferrable), a rejection, no events at all. */
const Tally = Aggregate.make({
  name: "tally",
  commands: {
    "tally.add": Aggregate.command("tally.add", { tallyId: Schema.String, n: Schema.Number }),
    "tally.remind": Aggregate.command("tally.remind", { tallyId: Schema.String, at: Schema.Number }),
    "tally.refuse": Aggregate.command("tally.refuse", { tallyId: Schema.String }),
    "tally.touch": Aggregate.command("tally.touch", { tallyId: Schema.String })
  },
  events: Schema.Union(Added, Reminded),
  aggregateId: (command) => command.tallyId,
  initialState: { total: 0 },
  evolve: (state: { total: number }, event) =>
    event.type === "tally.added" ? { total: state.total + event.n } : state,
  decide: (_state, command) => {
    switch (command.type) {
      case "tally.add":
        return Decision.of({
          events: [{ type: "tally.added" as const, n: command.n }],
          effects: [{ kind: "tally.notify", key: `n-${command.n}`, payload: { n: command.n } }]
        })
      case "tally.remind":
        return Decision.of({
          events: [{ type: "tally.reminded" as const, at: command.at }],
          timers: [{ timerId: "remind", at: command.at, command: { type: "tally.touch", tallyId: command.tallyId } }]
        })
      case "tally.refuse":
        return Decision.reject("refused", "never")
      case "tally.touch":
        return Decision.none()
    }
  }
})

/** The run lengths `applyMany` was called with (the set-based path), in order. */
const runs: Array<number> = []

const upsert = (sql: SqlClient, id: string, n: number, count: number, seq: number) =>
  sql`INSERT INTO tally_totals (tally_id, total, events, updated_seq) VALUES (${id}, ${n}, ${count}, ${seq})
    ON CONFLICT (tally_id) DO UPDATE SET total = tally_totals.total + excluded.total,
    events = tally_totals.events + excluded.events, updated_seq = excluded.updated_seq`.pipe(Effect.asVoid)

const Totals = Projection.make(Tally, {
  name: "tally_totals",
  setup: Effect.flatMap(SqlClient, (sql) =>
    sql`CREATE TABLE IF NOT EXISTS tally_totals (tally_id TEXT PRIMARY KEY, total INTEGER NOT NULL,
      events INTEGER NOT NULL, updated_seq INTEGER NOT NULL)`.pipe(Effect.asVoid)
  ),
  reset: Effect.flatMap(SqlClient, (sql) => sql`DELETE FROM tally_totals`.pipe(Effect.asVoid)),
  apply: (event, record) =>
    Effect.flatMap(SqlClient, (sql) =>
      upsert(sql, record.aggregateId, event.type === "tally.added" ? event.n : 0, 1, record.sequence)
    ),
  // Per tally: the sum, the count and the newest sequence of the run, what `apply` one by one leaves.
  applyMany: (run) =>
    Effect.flatMap(SqlClient, (sql) =>
      Effect.gen(function* () {
        runs.push(run.length)
        const byTally = new Map<string, { n: number; count: number; seq: number }>()
        for (const { event, record } of run) {
          const t = byTally.get(record.aggregateId) ?? { n: 0, count: 0, seq: 0 }
          byTally.set(record.aggregateId, {
            n: t.n + (event.type === "tally.added" ? event.n : 0),
            count: t.count + 1,
            seq: record.sequence
          })
        }
        for (const [id, t] of byTally) yield* upsert(sql, id, t.n, t.count, t.seq)
      })
    )
})

const commands = [
  { commandId: "a-1", type: "tally.add", tallyId: "t1", n: 1 },
  { commandId: "a-2", type: "tally.add", tallyId: "t1", n: 2 },
  { commandId: "r-1", type: "tally.refuse", tallyId: "t1" },
  { commandId: "n-1", type: "tally.touch", tallyId: "t1" },
  { commandId: "m-1", type: "tally.remind", tallyId: "t1", at: 5_000 },
  { commandId: "a-3", type: "tally.add", tallyId: "t2", n: 3 },
  { commandId: "a-4", type: "tally.add", tallyId: "t1", n: 4 }
]

const rows = Effect.gen(function* () {
  const sql = yield* SqlClient
  const all: Record<string, ReadonlyArray<unknown>> = {}
  for (const table of ["events", "receipts", "outbox", "timers", "tally_totals"]) {
    all[table] = (yield* sql`SELECT * FROM ${sql(table)} ORDER BY 1, 2`).map((row) =>
      // Numbers as numbers on both stores (PostgreSQL's BIGINT columns arrive as numbers already).
      Object.fromEntries(Object.entries(row).map(([k, v]) => [k, typeof v === "bigint" ? Number(v) : v]))
    )
  }
  return all
})

/** What a client is answered: the accepted answer, or the typed failure's tag and reason. */
const answerOf = (exit: Exit.Exit<Engine.DispatchAnswer, unknown>) =>
  Exit.isSuccess(exit)
    ? { sequence: exit.value.sequence, events: exit.value.events.length, effectIds: exit.value.effectIds }
    : { failure: JSON.stringify(exit.cause) }

const config = { aggregates: [Tally], projections: [Totals], activation: "manual" as const }

describe("deferred runs", () => {
  it.effect("a batch answers and writes exactly what its commands dispatched one at a time do", () =>
    Effect.gen(function* () {
      // Reference: one command per batch.
      const alone = yield* Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.activate
        const answers = []
        for (const command of commands) answers.push(answerOf(yield* Effect.exit(engine.dispatchWithReceipt(command))))
        return { answers, rows: yield* rows }
      }).pipe(Effect.provide(engineLayer({ config })))
      runs.length = 0
      // All of them queued first, then one batch.
      const together = yield* Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const fibers = yield* Effect.forEach(commands, (command) =>
          Effect.fork(Effect.exit(engine.dispatchWithReceipt(command)))
        )
        yield* waitForQueueDepth(commands.length)
        yield* engine.activate
        const exits = yield* Fiber.joinAll(fibers)
        assert.strictEqual((yield* engine.stats).transactions, 1)
        return { answers: exits.map(answerOf), rows: yield* rows }
      }).pipe(Effect.provide(engineLayer({ config })))

      assert.deepStrictEqual(together.answers, alone.answers)
      assert.deepStrictEqual(together.rows, alone.rows)
      // The rejection and the no-event command answer the newest sequence before them (a-2's, 2).
      const receipts = alone.rows.receipts as ReadonlyArray<{ command_id: string; last_sequence: number }>
      assert.deepStrictEqual(
        receipts.map((r) => [r.command_id, Number(r.last_sequence)]),
        [
          ["a-1", 1],
          ["a-2", 2],
          ["a-3", 4],
          ["a-4", 5],
          ["m-1", 3],
          ["n-1", 2],
          ["r-1", 2]
        ]
      )
      // The projection took each run at once: a-1 and a-2 before m-1 (whose timer is written at once,
      // alone), then a-3 and a-4.
      assert.deepStrictEqual(runs, [2, 2])
    })
  )
})
