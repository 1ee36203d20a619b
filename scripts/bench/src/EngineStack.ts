/** Building the engine under test over a file store, quietly (the engine's info logs would drown the progress). */
import { SqliteClient as SqliteNode } from "@effect/sql-sqlite-node"
import { Engine, SqliteStore, type EngineConfig } from "@orchestration/engine"
import { Effect, Layer, Logger, LogLevel, type Scope } from "effect"
import { join } from "node:path"
import { Counter, Counters } from "./BenchDomain.js"

export const benchConfig: EngineConfig = { aggregates: [Counter], projections: [Counters] }

export const storeFile = (dir: string) => join(dir, "engine.db")

/**
 * The SQLite client under the engine: the engine's own (the default), or @effect/sql-sqlite-node's
 * stock client handed in by the application (`SqliteStore.layerOver`).
 */
export type StoreClient = "default" | "sqlite-node"

const store = (dir: string, client: StoreClient) => {
  const options = { filename: storeFile(dir), synchronous: "FULL" } as const
  return client === "default"
    ? SqliteStore.layer(options)
    : // orDie: `SqliteNode.layer` declares ConfigError only for its Config-reading sibling; it reads none.
      SqliteStore.layerOver(options, Layer.orDie(SqliteNode.layer({ filename: options.filename })))
}

export const engineLayer = (dir: string, config: Partial<EngineConfig> = {}, client: StoreClient = "default") =>
  Engine.layer({ ...benchConfig, ...config }).pipe(Layer.provideMerge(store(dir, client)))

/** Runs a scoped benchmark program; a failure is raised, never swallowed. */
export const runBench = <A, E>(program: Effect.Effect<A, E, Scope.Scope>): Promise<A> =>
  Effect.runPromise(program.pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Warning)))
