/**
 * The assumptions EffectSqlInternals.ts makes about @effect/sql beyond its typed API. If an upgrade
 * of @effect/sql breaks one, a test here fails by name; fix EffectSqlInternals.ts (or drop the direct
 * path) before shipping the upgrade. Each test runs a statement against a recording connection, so
 * it sees which path ran: the connection's `execute` (@effect/sql's own) or the direct run.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import * as Statement from "@effect/sql/Statement"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { statementPrototype, withDirectStatements } from "../src/storage/EffectSqlInternals.js"

const recording = Effect.gen(function* () {
  const calls: Array<string> = []
  const connection: Connection = {
    execute: (sql, params) => Effect.sync(() => (calls.push(`execute ${sql} ${JSON.stringify(params)}`), [])),
    executeRaw: (sql) => Effect.sync(() => (calls.push(`raw ${sql}`), [])),
    executeValues: (sql) => Effect.sync(() => (calls.push(`values ${sql}`), [])),
    executeUnprepared: (sql) => Effect.sync(() => (calls.push(`unprepared ${sql}`), [])),
    executeStream: () => Stream.empty
  }
  const base = yield* Client.make({
    acquirer: Effect.succeed(connection),
    compiler: Statement.makeCompilerSqlite(),
    spanAttributes: []
  }).pipe(Effect.provide(Reactivity.layer))
  const sql = withDirectStatements(
    base,
    connection,
    (text, params) => Effect.sync(() => (calls.push(`direct ${text} ${JSON.stringify(params)}`), [{ direct: true }])),
    (text, params) => Effect.sync(() => (calls.push(`outside ${text} ${JSON.stringify(params)}`), [{ outside: true }]))
  )
  const inTransaction = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.provideService(effect, Client.TransactionConnection, [connection, 0] as const)
  return { calls, sql, base, inTransaction }
})

describe("@effect/sql internals the direct statement path relies on", () => {
  it.effect("plain statements share one prototype whose commit runs them, and an own commit overrides it", () =>
    Effect.gen(function* () {
      const { base } = yield* recording
      const prototype = statementPrototype(base)
      assert.strictEqual(typeof prototype.commit, "function")
      assert.strictEqual(Object.getPrototypeOf(base`SELECT ${1}`), prototype)
      assert.strictEqual(Object.getPrototypeOf(base.unsafe("SELECT 2")), prototype)
      const statement = base.unsafe<{ readonly value: string }>("SELECT 3")
      ;(statement as unknown as { commit: unknown }).commit = () => Effect.succeed([{ value: "overridden" }])
      assert.deepStrictEqual(yield* statement, [{ value: "overridden" }])
    })
  )

  it.effect("inside a transaction on the connection, a statement runs directly with its compiled text", () =>
    Effect.gen(function* () {
      const { calls, sql, inTransaction } = yield* recording
      const rows = yield* inTransaction(sql`SELECT * FROM t WHERE id = ${7} AND ${sql.in("k", [1, 2])}`)
      assert.deepStrictEqual(rows, [{ direct: true }])
      yield* inTransaction(sql.unsafe("DELETE FROM t WHERE id = ?", [8]))
      yield* inTransaction(sql`INSERT INTO t ${sql.insert({ id: 9, name: "n" })}`)
      assert.deepStrictEqual(calls, [
        `direct SELECT * FROM t WHERE id = ? AND "k" IN (?,?) [7,1,2]`,
        "direct DELETE FROM t WHERE id = ? [8]",
        `direct INSERT INTO t ("id","name") VALUES (?,?) [9,"n"]`
      ])
    })
  )

  it.effect("outside any transaction, a statement runs directly through the outside run", () =>
    Effect.gen(function* () {
      const { calls, sql } = yield* recording
      assert.deepStrictEqual(yield* sql`SELECT ${1}`, [{ outside: true }])
      yield* sql.unsafe("DELETE FROM t WHERE id = ?", [8])
      assert.deepStrictEqual(calls, ["outside SELECT ? [1]", "outside DELETE FROM t WHERE id = ? [8]"])
    })
  )

  it.effect("under a statement transformer, @effect/sql's own path runs", () =>
    Effect.gen(function* () {
      const { calls, sql, inTransaction } = yield* recording
      const transformed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        Statement.withTransformer(effect, (statement) => Effect.succeed(statement))
      yield* transformed(sql`SELECT ${1}`)
      yield* inTransaction(transformed(sql`SELECT ${2}`))
      assert.deepStrictEqual(calls, ["execute SELECT ? [1]", "execute SELECT ? [2]"])
    })
  )

  it.effect("a transaction on another connection takes @effect/sql's own path", () =>
    Effect.gen(function* () {
      const { calls, sql } = yield* recording
      const other: Connection = {
        execute: (text) => Effect.sync(() => (calls.push(`other ${text}`), [])),
        executeRaw: () => Effect.succeed([]),
        executeValues: () => Effect.succeed([]),
        executeUnprepared: () => Effect.succeed([]),
        executeStream: () => Stream.empty
      }
      yield* Effect.provideService(sql`SELECT ${3}`, Client.TransactionConnection, [other, 0] as const)
      assert.deepStrictEqual(calls, ["other SELECT ?"])
    })
  )

  it.effect("the wrapped client keeps every other member of the client", () =>
    Effect.gen(function* () {
      const { sql, base } = yield* recording
      assert.strictEqual(sql.safe, sql)
      for (const member of ["reserve", "withTransaction", "insert", "in", "onDialectOrElse", "reactive"] as const) {
        assert.strictEqual(sql[member], base[member], member)
      }
      assert.strictEqual(
        sql.onDialectOrElse({ sqlite: () => "sqlite", orElse: () => "other" }),
        "sqlite",
        "the dialect is the compiler's"
      )
    })
  )
})
