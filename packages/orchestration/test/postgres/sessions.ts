/**
 * Two-session helpers for the PostgreSQL tests: hold one engine's dispatch transaction open at a
 * fault point, learn its backend pid, and wait (on the server's own lock table, not on a timer) until
 * another session is blocked behind it. Interleavings then happen in a fixed order.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import pg from "pg"
import { Deferred, Effect, Layer, type Scope } from "effect"
import { Engine, FaultPoints } from "../../src/index.js"
import type { FaultPointName } from "../../src/FaultPoints.js"
import * as TestStore from "../../src/testing/TestStore.js"
import { jobsConfig } from "../fixtures/Jobs.js"
import { tempDbFile } from "../fixtures/harness.js"

/** Real time for network round trips (never the TestClock): PostgreSQL answers asynchronously. */
export const wait = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))

/**
 * A FaultPoints layer that, once armed, stops the next hit of `point` (inside the dispatch
 * transaction for `dispatch.before-commit`) until released, and records that transaction's backend pid.
 */
export const holdAt = (point: FaultPointName, sql: SqlClient) => {
  const state = { armed: false }
  const holding = Effect.runSync(Deferred.make<number>())
  const release = Effect.runSync(Deferred.make<void>())
  const layer = Layer.succeed(FaultPoints.FaultPoints, {
    enabled: true,
    hit: (hit) =>
      hit === point && state.armed
        ? Effect.gen(function* () {
            state.armed = false
            // The hook runs inside the transaction: this query runs on its connection.
            const rows = yield* sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.pipe(Effect.orDie)
            yield* Deferred.succeed(holding, Number(rows[0]!.pid))
            yield* Deferred.await(release)
          })
        : Effect.void
  })
  return {
    layer,
    arm: Effect.sync(() => (state.armed = true)),
    /** The pid of the held transaction, once it is held. */
    held: Deferred.await(holding),
    release: Deferred.succeed(release, undefined)
  }
}

/** Waits until some session is blocked behind backend `pid` (bounded; fails loudly). */
export const blockedBehind = (sql: SqlClient, pid: number, what: string) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 20_000
    while (Date.now() < deadline) {
      const rows = yield* sql<{
        n: number
      }>`SELECT COUNT(*) AS n FROM pg_stat_activity WHERE ${pid} = ANY(pg_blocking_pids(pid))`
      if (Number(rows[0]!.n) > 0) return
      yield* wait(10)
    }
    return yield* Effect.dieMessage(`never blocked: ${what}`)
  })

/** A jobs engine on a fresh schema whose transactions can be held at `point` (holdAt), with its store (and its file, for another process's store on it). */
export const engineHeldAt = (point: FaultPointName) =>
  Effect.gen(function* () {
    const file = tempDbFile()
    const store = yield* Layer.build(TestStore.layer({ filename: file }))
    const sql = yield* Effect.provide(SqlClient, store)
    const hold = holdAt(point, sql)
    const engine = yield* Effect.provide(
      Engine.Engine,
      yield* Layer.build(
        Engine.layer({ ...jobsConfig, activation: "on-start" }).pipe(
          Layer.provide(hold.layer),
          Layer.provide(Layer.succeedContext(store))
        )
      )
    )
    const inStore = <A, E>(effect: Effect.Effect<A, E, SqlClient>) => Effect.provide(effect, store)
    return { file, store, sql, hold, engine, inStore }
  }) satisfies Effect.Effect<unknown, unknown, Scope.Scope>

/** An engine on its own schema (the run's database), that schema's name, and its store for table reads. */
export const engineOn = Effect.gen(function* () {
  const store = yield* Layer.build(TestStore.layer({ filename: tempDbFile() }))
  const sql = yield* Effect.provide(SqlClient, store)
  const engine = yield* Effect.provide(
    Engine.Engine,
    yield* Layer.build(
      Engine.layer({ ...jobsConfig, activation: "on-start" }).pipe(Layer.provide(Layer.succeedContext(store)))
    )
  )
  const [{ schema }] = (yield* sql<{ schema: string }>`SELECT current_schema() AS schema`.pipe(Effect.orDie)) as [
    { schema: string }
  ]
  return {
    engine,
    sql,
    schema,
    inStore: <A, E>(effect: Effect.Effect<A, E, SqlClient>) => Effect.provide(effect, store)
  }
})

/** A session of its own (a raw writer not ordered with the engine's), its transaction open after `statement` until `commit`. */
export const otherSession = (statement: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: TestStore.testDatabaseUrl() })
      await client.connect()
      await client.query("BEGIN")
      await client.query(statement)
      const pid = Number((await client.query("SELECT pg_backend_pid() AS pid")).rows[0].pid)
      return { client, pid, commit: Effect.promise(() => client.query("COMMIT")) }
    }),
    ({ client }) => Effect.promise(() => client.end())
  )
