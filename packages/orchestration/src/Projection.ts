/**
 * A projection is a SQL read model updated inside the commit transaction, so it is never ahead of
 * or behind the log. It declares the aggregate whose events it reads, how to create and empty its
 * tables, and how to apply one event. `apply` must only write SQL: it runs inside the transaction.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import type { AggregateDefinition, EventRecord } from "./Aggregate.js"
import type { StorageFailure, UndecodableEvent } from "./Errors.js"
import * as EventLog from "./EventLog.js"
import { writeTransaction } from "./storage/Transactions.js"

export type ProjectionEffect = Effect.Effect<void, SqlError, SqlClient>

export interface Projection<E = any> {
  readonly name: string
  readonly aggregate: string
  /** Event types it handles; all of the aggregate's events when absent. */
  readonly eventTypes: ReadonlySet<string> | undefined
  /** Creates its tables if missing. Runs at engine start, idempotent. */
  readonly setup: ProjectionEffect
  /** Empties its tables, before a rebuild from the log. */
  readonly reset: ProjectionEffect
  readonly apply: (event: E, record: EventRecord) => ProjectionEffect
  /**
   * Optional, set-based: applies a run of its events (several commands', in log order) in fewer
   * statements. It must leave the tables exactly as `apply` over each event in order would; the
   * processor uses it for the commands a batch writes together (Processor.ts), and `apply` wherever
   * an event is written alone (a batch re-run with savepoints, an operator's action, a rebuild).
   * In a run, each projection takes all of the run's events after the run's rows are written, not
   * event by event between them: one more reason a projection reads only its own tables.
   */
  readonly applyMany?: (run: ReadonlyArray<ProjectedEvent<E>>) => ProjectionEffect
}

export interface ProjectedEvent<E = any> {
  readonly event: E
  readonly record: EventRecord
}

export const make = <E extends { readonly type: string }>(
  aggregate: AggregateDefinition<any, any, E>,
  definition: {
    readonly name: string
    readonly eventTypes?: ReadonlyArray<E["type"]>
    readonly setup: ProjectionEffect
    readonly reset: ProjectionEffect
    readonly apply: (event: E, record: EventRecord) => ProjectionEffect
    readonly applyMany?: (run: ReadonlyArray<ProjectedEvent<E>>) => ProjectionEffect
  }
): Projection<E> => ({
  name: definition.name,
  aggregate: aggregate.name,
  eventTypes: definition.eventTypes ? new Set(definition.eventTypes) : undefined,
  setup: definition.setup,
  reset: definition.reset,
  apply: definition.apply,
  ...(definition.applyMany === undefined ? {} : { applyMany: definition.applyMany })
})

export const handles = (projection: Projection, record: { readonly aggregateType: string; readonly type: string }) =>
  projection.aggregate === record.aggregateType &&
  (projection.eventTypes === undefined || projection.eventTypes.has(record.type))

/**
 * Empties every projection and replays the whole log into them, in one transaction: readers see
 * the old read model or the rebuilt one, never half of it. Answers how many events were applied.
 */
export const rebuild = (
  projections: ReadonlyArray<Projection>,
  decode: (record: EventRecord) => Effect.Effect<unknown, UndecodableEvent>
): Effect.Effect<number, StorageFailure | UndecodableEvent, SqlClient> =>
  writeTransaction(
    "rebuild projections",
    Effect.gen(function* () {
      for (const projection of projections) yield* projection.reset
      let cursor = 0
      let applied = 0
      while (true) {
        const page = yield* EventLog.read({ after: cursor, limit: 1000 })
        if (page.length === 0) return applied
        for (const record of page) {
          const event = yield* decode(record)
          for (const projection of projections) {
            if (handles(projection, record)) yield* projection.apply(event, record)
          }
          applied++
        }
        cursor = page[page.length - 1]!.sequence
      }
    })
  )
