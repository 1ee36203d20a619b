/**
 * Each engine table has one owner: its module states the table's columns and what the commit path
 * inserts, and every writer builds its statements from that. The migrations are history (they must
 * not change what an existing store looks like), so this test holds the two together: the migrated
 * schema has exactly the columns the module names, in order, and each inserted column has the
 * logical type the module gives it. Runs on SQLite and in the PostgreSQL conformance run.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { EventLog, Outbox, Receipts, StreamChunks } from "../src/index.js"
import { migrate } from "../src/storage/Migrations.js"
import * as TableColumns from "../src/storage/TableColumns.js"
import * as TestStore from "../src/testing/TestStore.js"

/** The migrated table's columns and their declared types, in the schema's order. */
const schemaOf = (table: string) =>
  Effect.flatMap(SqlClient, (sql) =>
    sql.onDialectOrElse({
      pg: () =>
        sql<{ name: string; type: string }>`SELECT column_name AS name, data_type AS type
          FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ${table}
          ORDER BY ordinal_position`,
      orElse: () => sql<{ name: string; type: string }>`SELECT name, type FROM pragma_table_info(${table}) ORDER BY cid`
    })
  )

const logicalType = (declared: string) => {
  const type = declared.toLowerCase()
  if (type === "text") return "text"
  if (type === "integer" || type === "bigint") return "int"
  return `unexpected ${declared}`
}

const tables: ReadonlyArray<{
  readonly columns: ReadonlyArray<string>
  readonly shape: TableColumns.InsertShape<any>
}> = [
  { columns: EventLog.columns, shape: EventLog.insertShape },
  { columns: Outbox.columns, shape: Outbox.insertShape },
  { columns: Receipts.columns, shape: Receipts.insertShape }
]

describe("one owner per table", () => {
  for (const { columns, shape } of tables) {
    it.effect(`the migrated ${shape.table} table has the columns ${shape.table}'s module names, with their types`, () =>
      Effect.gen(function* () {
        yield* migrate
        const schema = yield* schemaOf(shape.table)
        assert.deepStrictEqual(
          schema.map((c) => c.name),
          [...columns]
        )
        const declared = new Map(schema.map((c) => [c.name, logicalType(c.type)]))
        for (const column of TableColumns.bound(shape)) {
          assert.strictEqual(declared.get(column.name), column.type, `${shape.table}.${column.name}`)
        }
        for (const name of TableColumns.names(shape)) assert.include([...columns], name)
      }).pipe(Effect.provide(TestStore.layer()))
    )
  }

  it.effect("the migrated effect_stream_chunks table has the columns StreamChunks names", () =>
    Effect.gen(function* () {
      yield* migrate
      const schema = yield* schemaOf("effect_stream_chunks")
      assert.deepStrictEqual(
        schema.map((c) => c.name),
        [...StreamChunks.columns]
      )
    }).pipe(Effect.provide(TestStore.layer()))
  )

  it("a repeated column binds the value of the column it names; constants are written by the statement", () => {
    const row = {
      effectId: "e",
      commandId: "c",
      aggregateType: "t",
      aggregateId: "a",
      kind: "k",
      payloadJson: "{}",
      lane: "l",
      availableAt: 5,
      now: 7
    }
    assert.deepStrictEqual(TableColumns.toRecord(Outbox.insertShape, row), {
      effect_id: "e",
      command_id: "c",
      aggregate_type: "t",
      aggregate_id: "a",
      kind: "k",
      payload: "{}",
      lane: "l",
      status: "pending",
      attempts: 0,
      available_at: 5,
      created_at: 7,
      updated_at: 7
    })
    assert.deepStrictEqual(TableColumns.sources(Outbox.insertShape).slice(7), [
      { literal: "'pending'" },
      { literal: "0" },
      { bound: 7 },
      { bound: 8 },
      { bound: 8 }
    ])
  })
})
