/**
 * The benchmark's own domain, shaped so one command costs exactly what the floor does: one event,
 * one projection upsert, one effect intent (outbox row), plus the receipt the engine always writes.
 * `onOutcome` records the effect's result as a second event, for the end-to-end measurement.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Aggregate, Decision, Projection } from "@orchestration/engine"
import { Effect, Schema } from "effect"

export const effectKind = "bench.effect"

export const CounterEvent = Schema.Union(
  Aggregate.event("counter.bumped", { n: Schema.Number }),
  Aggregate.event("counter.effect-done", { effectId: Schema.String, status: Schema.String })
)
export type CounterEvent = typeof CounterEvent.Type

export const Counter = Aggregate.make({
  name: "counter",
  commands: {
    "counter.bump": Aggregate.command("counter.bump", { counterId: Schema.String, n: Schema.Number })
  },
  events: CounterEvent,
  aggregateId: (command) => command.counterId,
  initialState: { bumps: 0 },
  evolve: (state: { bumps: number }, event: CounterEvent) =>
    event.type === "counter.bumped" ? { bumps: state.bumps + 1 } : state,
  decide: (_state, command) =>
    Decision.of<CounterEvent>({
      events: [{ type: "counter.bumped", n: command.n }],
      effects: [{ kind: effectKind, key: "0", payload: { n: command.n } }]
    }),
  onOutcome: (_state, outcome) =>
    Decision.of<CounterEvent>({
      events: [{ type: "counter.effect-done", effectId: outcome.effectId, status: outcome.status }]
    })
})

/** The read model: one upserted row per counter, the same statement the floor runs. */
export const Counters = Projection.make(Counter, {
  name: "bench_counters",
  eventTypes: ["counter.bumped"],
  setup: Effect.flatMap(SqlClient, (sql) =>
    sql`CREATE TABLE IF NOT EXISTS bench_counters (counter_id TEXT PRIMARY KEY, total INTEGER NOT NULL, updated_seq INTEGER NOT NULL)`.pipe(
      Effect.asVoid
    )
  ),
  reset: Effect.flatMap(SqlClient, (sql) => sql`DELETE FROM bench_counters`.pipe(Effect.asVoid)),
  apply: (_event, record) =>
    Effect.flatMap(SqlClient, (sql) =>
      sql`INSERT INTO bench_counters (counter_id, total, updated_seq) VALUES (${record.aggregateId}, 1, ${record.sequence})
        ON CONFLICT (counter_id) DO UPDATE SET total = bench_counters.total + 1, updated_seq = excluded.updated_seq`.pipe(
        Effect.asVoid
      )
    ),
  // The same upsert for a run of events (several commands' of one batch) in one statement: per
  // counter, its count added and its newest sequence kept, what `apply` one by one leaves.
  applyMany: (run) =>
    Effect.flatMap(SqlClient, (sql) =>
      sql`INSERT INTO bench_counters (counter_id, total, updated_seq)
        SELECT column1, COUNT(*), MAX(column2) FROM (VALUES ${sql.csv(
          run.map(({ record }) => sql`(${record.aggregateId}, CAST(${record.sequence} AS INTEGER))`)
        )}) AS v GROUP BY column1
        ON CONFLICT (counter_id) DO UPDATE SET total = bench_counters.total + excluded.total, updated_seq = excluded.updated_seq`.pipe(
        Effect.asVoid
      )
    )
})

/** Client `client` sends to its own counter, so the state cache serves every command after the first. */
export const bump = (run: string, i: number, client: number) => ({
  commandId: `${run}-${i}`,
  type: "counter.bump",
  counterId: `c-${client}`,
  n: i
})
