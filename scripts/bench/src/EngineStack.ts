/** Building the engine under test over a file store, quietly (the engine's info logs would drown the progress). */
import { Engine, SqliteStore, type EngineConfig } from "@orchestration/engine"
import { Effect, Layer, Logger, LogLevel, type Scope } from "effect"
import { join } from "node:path"
import { Counter, Counters } from "./BenchDomain.js"

export const benchConfig: EngineConfig = { aggregates: [Counter], projections: [Counters] }

export const storeFile = (dir: string) => join(dir, "engine.db")

export const engineLayer = (dir: string, config: Partial<EngineConfig> = {}) =>
  Engine.layer({ ...benchConfig, ...config }).pipe(
    Layer.provideMerge(SqliteStore.layer({ filename: storeFile(dir), synchronous: "FULL" }))
  )

/** Runs a scoped benchmark program; a failure is raised, never swallowed. */
export const runBench = <A, E>(program: Effect.Effect<A, E, Scope.Scope>): Promise<A> =>
  Effect.runPromise(program.pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Warning)))
