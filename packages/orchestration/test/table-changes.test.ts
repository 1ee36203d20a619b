/**
 * TableChanges: the count of this process's row changes to watched tables, which lets an idle reactor
 * poll skip its reads. It must move on every change to a watched table, whatever path wrote it (the
 * SqlClient, the commit writer's raw statements, a rolled-back transaction), stay put for other tables
 * and for statements that change no row, and be absent where another process may write.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { SqliteStore, StoreBackend } from "../src/index.js"
import * as SqliteClient from "../src/storage/SqliteClient.js"
import { SqliteConnection } from "../src/storage/SqliteStore.js"
import { sqliteBackend } from "../src/storage/StoreBackend.js"
import * as TableChanges from "../src/storage/TableChanges.js"
import { tempDbFile } from "./fixtures/harness.js"

const store = () => SqliteStore.layer({ filename: tempDbFile() })

const setup = Effect.gen(function* () {
  const sql = yield* SqlClient
  yield* sql`CREATE TABLE watched (id INTEGER PRIMARY KEY, v TEXT)`
  yield* sql`CREATE TABLE other (id INTEGER PRIMARY KEY)`
  const count = Option.getOrThrow(yield* TableChanges.watch(["watched"]))
  return { sql, count }
})

describe("TableChanges", () => {
  it.effect("counts every changed row of a watched table, through any path, and nothing else", () =>
    Effect.gen(function* () {
      const { sql, count } = yield* setup
      assert.strictEqual(count(), 0)
      yield* sql`INSERT INTO watched (id, v) VALUES (1, 'a'), (2, 'b')`
      assert.strictEqual(count(), 2)
      yield* sql`UPDATE watched SET v = 'c' WHERE id = 99`
      yield* sql`SELECT * FROM watched`
      yield* sql`INSERT INTO other (id) VALUES (1)`
      assert.strictEqual(count(), 2, "no row changed in a watched table")
      yield* sql`UPDATE watched SET v = 'c' RETURNING id`
      assert.strictEqual(count(), 4)
      yield* Effect.ignore(
        sql.withTransaction(sql`DELETE FROM watched WHERE id = 1`.pipe(Effect.zipRight(Effect.fail("refused"))))
      )
      assert.strictEqual(count(), 5, "a change rolled back stays counted: a poll only looks again")
      const raw = yield* SqliteConnection
      raw.prepare("INSERT INTO watched (id, v) VALUES (3, 'raw')").run()
      assert.strictEqual(count(), 6, "the raw connection's statements are counted too")
    }).pipe(Effect.scoped, Effect.provide(store()))
  )

  it.effect("watching again keeps one count per connection", () =>
    Effect.gen(function* () {
      const { sql, count } = yield* setup
      const again = Option.getOrThrow(yield* TableChanges.watch(["watched"]))
      yield* sql`INSERT INTO watched (id, v) VALUES (1, 'a')`
      assert.strictEqual(count(), 1)
      assert.strictEqual(again(), 1)
    }).pipe(Effect.scoped, Effect.provide(store()))
  )

  it.effect("is absent over a SQLite client without the store's lock, where another process may write", () =>
    Effect.gen(function* () {
      // SqliteClient.layer offers the raw connection (SqliteConnection) but takes no EXCLUSIVE lock:
      // a second writer's rows would never move this process's count, and an idle reactor poll
      // that trusted it would never read them.
      const sql = yield* SqlClient
      yield* sql`CREATE TABLE watched (id INTEGER PRIMARY KEY)`
      assert.isTrue(Option.isNone(yield* TableChanges.watch(["watched"])), "no count without the store's lock")
    }).pipe(Effect.scoped, Effect.provide(SqliteClient.layer({ filename: tempDbFile() })))
  )

  it.effect("is present over SqliteStore.layerOver, which locks the file, when the client offers its connection", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient
      yield* sql`CREATE TABLE watched (id INTEGER PRIMARY KEY)`
      assert.isTrue(Option.isSome(yield* TableChanges.watch(["watched"])))
    }).pipe(
      Effect.scoped,
      Effect.provide(
        Effect.sync(tempDbFile).pipe(
          Effect.map((filename) => SqliteStore.layerOver({ filename }, SqliteClient.layer({ filename }))),
          Layer.unwrapEffect
        )
      )
    )
  )

  it.effect("is absent on a shared store, where other processes write", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient
      yield* sql`CREATE TABLE watched (id INTEGER PRIMARY KEY)`
      const count = yield* TableChanges.watch(["watched"]).pipe(
        Effect.provideService(StoreBackend, { ...sqliteBackend, shared: true })
      )
      assert.isTrue(Option.isNone(count))
    }).pipe(Effect.scoped, Effect.provide(store()))
  )
})
