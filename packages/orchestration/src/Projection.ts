/**
 * A projection is a SQL read model updated inside the commit transaction, so it is never ahead of
 * or behind the log. It declares the aggregate whose events it reads, how to create and empty its
 * tables, and how to apply one event. `apply` must only write SQL: it runs inside the transaction.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type { Effect } from "effect"
import type { AggregateDefinition, EventRecord } from "./Aggregate.js"

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
}

export const make = <E extends { readonly type: string }>(
  aggregate: AggregateDefinition<any, any, E>,
  definition: {
    readonly name: string
    readonly eventTypes?: ReadonlyArray<E["type"]>
    readonly setup: ProjectionEffect
    readonly reset: ProjectionEffect
    readonly apply: (event: E, record: EventRecord) => ProjectionEffect
  }
): Projection<E> => ({
  name: definition.name,
  aggregate: aggregate.name,
  eventTypes: definition.eventTypes ? new Set(definition.eventTypes) : undefined,
  setup: definition.setup,
  reset: definition.reset,
  apply: definition.apply
})

export const handles = (projection: Projection, record: { readonly aggregateType: string; readonly type: string }) =>
  projection.aggregate === record.aggregateType &&
  (projection.eventTypes === undefined || projection.eventTypes.has(record.type))
