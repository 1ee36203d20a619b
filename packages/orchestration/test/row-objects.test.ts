/**
 * Rows read through our SQLite client are built from the driver's arrays (RowObjects.ts); they must
 * be the objects the driver itself would have made, and follow the schema when it changes.
 */
import { SafeIntegers, SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as SqliteClient from "../src/storage/SqliteClient.js"

const withClient = <A, E>(filename: string, body: (sql: SqlClient) => Effect.Effect<A, E>) =>
  Effect.runPromise(
    Effect.flatMap(SqlClient, body).pipe(Effect.scoped, Effect.provide(SqliteClient.layer({ filename })))
  )

describe("rows read through the SQLite client", () => {
  it("are the driver's own object rows: every type, nulls, column order, repeated names", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "rows-")), "db.sqlite")
    const setup = new Database(file)
    setup.exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, score REAL, data BLOB, note TEXT);
      INSERT INTO t VALUES (1, 'a', 1.5, x'00ff', NULL), (2, 'b', -2, NULL, 'n'), (3, NULL, NULL, x'', 'é');`)
    const queries = [
      "SELECT * FROM t ORDER BY id",
      "SELECT note, id, name AS id FROM t ORDER BY t.id",
      "SELECT * FROM t WHERE 0"
    ]
    const driver = queries.map((query) => setup.prepare(query).all())
    setup.close()
    const ours = await withClient(file, (sql) => Effect.forEach(queries, (query) => sql.unsafe(query)))
    assert.deepStrictEqual(ours, driver as ReadonlyArray<ReadonlyArray<object>>)
    // Same keys in the same order (deepStrictEqual ignores key order).
    assert.deepStrictEqual(
      ours.map((rows) => rows.map((row) => Object.keys(row as object))),
      driver.map((rows) => rows.map((row) => Object.keys(row as object)))
    )
    assert.deepStrictEqual(ours[1]![0], { note: null, id: "a" })
  })

  it("keep a column named __proto__ as a property, not as the prototype", async () => {
    const rows = await withClient(":memory:", (sql) => sql.unsafe(`SELECT 1 AS "__proto__", 2 AS b`))
    const row = rows[0] as Record<string, unknown>
    assert.strictEqual(Object.getPrototypeOf(row), Object.prototype)
    assert.deepStrictEqual(Object.getOwnPropertyDescriptor(row, "__proto__")?.value, 1)
    assert.strictEqual(row.b, 2)
  })

  it("run a statement with RETURNING once", async () => {
    const counted = await withClient(":memory:", (sql) =>
      Effect.gen(function* () {
        yield* sql`CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT)`
        const returned = yield* sql`INSERT INTO t (v) VALUES ('x'), ('y') RETURNING id, v`
        const count = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM t`
        return { returned, count: count[0]!.n }
      })
    )
    assert.deepStrictEqual(counted, {
      returned: [
        { id: 1, v: "x" },
        { id: 2, v: "y" }
      ],
      count: 2
    })
  })

  it("follow the schema: a column added, dropped or renamed shows in the next read of the same statement", async () => {
    const reads = await withClient(":memory:", (sql) =>
      Effect.gen(function* () {
        yield* sql`CREATE TABLE t (a INTEGER, b INTEGER)`
        yield* sql`INSERT INTO t VALUES (1, 2)`
        const read = sql`SELECT * FROM t`
        const first = yield* read
        yield* sql`ALTER TABLE t ADD COLUMN c INTEGER DEFAULT 3`
        const added = yield* sql`SELECT * FROM t`
        yield* sql`ALTER TABLE t RENAME COLUMN b TO renamed`
        const renamed = yield* sql`SELECT * FROM t`
        yield* sql`ALTER TABLE t DROP COLUMN a`
        const dropped = yield* sql`SELECT * FROM t`
        return [first, added, renamed, dropped]
      })
    )
    assert.deepStrictEqual(reads, [
      [{ a: 1, b: 2 }],
      [{ a: 1, b: 2, c: 3 }],
      [{ a: 1, renamed: 2, c: 3 }],
      [{ renamed: 2, c: 3 }]
    ])
  })

  it("answer integers as bigint under safe integers, as the driver does", async () => {
    const rows = await withClient(":memory:", (sql) =>
      Effect.provideService(sql`SELECT 9007199254740993 AS big, 'x' AS s`, SafeIntegers, true)
    )
    assert.deepStrictEqual(rows, [{ big: 9007199254740993n, s: "x" }])
  })
})
