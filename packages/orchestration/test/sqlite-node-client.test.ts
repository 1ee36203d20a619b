/**
 * An application that already has @effect/sql-sqlite-node's SqliteClient layer hands it to the engine
 * (`SqliteStore.layerOver`). The conformance suite runs over that client in full (vitest.sqlite-node
 * .config.ts); these tests pin what is particular to it: it really is the stock client under the
 * engine, the file is locked for this process as with the default client, and a restart replays.
 */
import { SqliteClient as SqliteNode } from "@effect/sql-sqlite-node"
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { Engine, SqliteStore, StoreLocked } from "../src/index.js"
import { SqliteConnection } from "../src/storage/SqliteClient.js"
import { accountsConfig, tempDbFile } from "./fixtures/harness.js"

const stockStore = (filename: string) =>
  // orDie: `SqliteNode.layer` declares ConfigError only for its Config-reading sibling; it reads none.
  SqliteStore.layerOver({ filename }, Layer.orDie(SqliteNode.layer({ filename })))

const engineOverStock = (filename: string) =>
  Engine.layer(accountsConfig).pipe(Layer.provideMerge(stockStore(filename)))

const open = (commandId: string, accountId: string) => ({ commandId, type: "account.open", accountId, owner: "ada" })

describe("the engine over @effect/sql-sqlite-node's SqlClient", () => {
  it.effect("the engine's SqlClient is the stock client, and the default client's raw connection is absent", () =>
    Effect.gen(function* () {
      const stock = yield* SqliteNode.SqliteClient
      const sql = yield* SqlClient
      assert.strictEqual(sql, stock)
      assert.isTrue(Option.isNone(yield* Effect.serviceOption(SqliteConnection)))
      const pragmas = yield* sql<{ journal_mode: string }>`PRAGMA journal_mode`
      assert.strictEqual(pragmas[0]!.journal_mode, "wal")
      const engine = yield* Engine.Engine
      const answer = yield* engine.dispatchWithReceipt(open("c-1", "acc-1"))
      assert.strictEqual(answer.sequence, 1)
    }).pipe(Effect.provide(engineOverStock(tempDbFile())))
  )

  it.effect("a second engine on the same file is refused with StoreLocked while the first holds it", () => {
    const file = tempDbFile()
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.dispatchWithReceipt(open("c-1", "acc-1"))
      const refused = yield* Effect.flip(Layer.build(engineOverStock(file)))
      assert.instanceOf(refused, StoreLocked)
    }).pipe(Effect.provide(engineOverStock(file)), Effect.scoped)
  })

  it.effect("after close and reopen, a duplicate is answered from its receipt and sequences continue", () => {
    const file = tempDbFile()
    const dispatch = (commandId: string, accountId: string) =>
      Effect.flatMap(Engine.Engine, (engine) => engine.dispatchWithReceipt(open(commandId, accountId))).pipe(
        Effect.provide(engineOverStock(file))
      )
    return Effect.gen(function* () {
      const first = yield* dispatch("c-1", "acc-1")
      const again = yield* dispatch("c-1", "acc-1")
      assert.deepStrictEqual(again, { ...first, duplicate: true })
      const next = yield* dispatch("c-2", "acc-2")
      assert.strictEqual(next.sequence, first.sequence + 1)
    })
  })
})
