/**
 * A domain as the server runs it. The server is domain-agnostic: it takes the aggregates and
 * projections for the engine, the reactors for boot, the rule that says which client commands are
 * new work (refused below the disk floor), the services the reactors need, and optionally the
 * thread views. `src/domain.ts` names the domain `main.ts` serves.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { Aggregate, Engine, FlushWindows, Projection, Reactor } from "@orchestration/engine"
import type { Layer } from "effect"
import type { ServerConfig } from "./Config.js"
import type { ThreadViews } from "./ThreadViews.js"

/** What the engine's layer gives a domain's layers: the store, the engine, its flush windows. */
export type EngineServices = SqlClient | Engine.Engine | FlushWindows

/** What a domain's layers may read when they are built. */
export interface DomainContext {
  readonly config: ServerConfig
  /** Where the domain may keep files of its own (e.g. the agents' world directory). */
  readonly dataDir: string
  /** The process environment, for a domain's own variables (read them here, once). */
  readonly env: Readonly<Record<string, string | undefined>>
}

export interface ServerDomain<R = never> {
  readonly name: string
  /** The aggregates, or a function of the context when their rules are the operator's configuration. */
  readonly aggregates:
    | ReadonlyArray<Aggregate.AnyAggregate>
    | ((context: DomainContext) => ReadonlyArray<Aggregate.AnyAggregate>)
  readonly projections?: ReadonlyArray<Projection.Projection>
  readonly reactors: ReadonlyArray<Reactor.ReactorDefinition<R>>
  /**
   * The services the reactors (and the thread views) need. Built once, before boot reconciles, over
   * the engine's layer (the engine, and the flush windows its streams share).
   */
  readonly layer: (context: DomainContext) => Layer.Layer<R, unknown, EngineServices>
  /** A command to show in the start-up line's curl example (its commandId is made unique). */
  readonly exampleCommand?: Readonly<Record<string, unknown>>
  /** The thread views; without them the thread routes answer 404. */
  readonly threads?: (context: DomainContext) => Layer.Layer<ThreadViews, unknown, R | EngineServices>
}

/** The aggregates the engine registers for this context. */
export const aggregatesOf = (domain: ServerDomain<any>, context: DomainContext) =>
  typeof domain.aggregates === "function" ? domain.aggregates(context) : domain.aggregates

/** Declares a domain, keeping its reactors' requirement type. */
export const make = <R>(domain: ServerDomain<R>): ServerDomain<R> => domain

/** Any domain, whatever its reactors need. */
export type AnyServerDomain = ServerDomain<any>
