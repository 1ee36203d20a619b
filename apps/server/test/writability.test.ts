import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Engine, SqliteStore, StorageFaults } from "@orchestration/engine"
import { Effect, Layer, TestClock } from "effect"
import { join } from "node:path"
import * as StoreWritability from "../src/StoreWritability.js"
import { tempDataDir } from "./fixtures/server.js"

/** An empty engine store in a fresh file: the probe writes into its receipts table. */
const store = () =>
  Engine.layer({ aggregates: [] }).pipe(
    Layer.provideMerge(SqliteStore.layer({ filename: join(tempDataDir(), "engine.db") }))
  )

// A store with no room to grow: compacted first (migrations that rebuild a table leave free pages a
// write could reuse), then capped at its size.
const cap = Effect.flatMap(SqlClient, (sql) =>
  Effect.zipRight(
    sql.unsafe("VACUUM"),
    Effect.flatMap(sql<{ page_count: number }>`PRAGMA page_count`, ([row]) =>
      sql.unsafe(`PRAGMA max_page_count = ${Number(row!.page_count)}`)
    )
  )
)
const uncap = Effect.flatMap(SqlClient, (sql) => sql.unsafe("PRAGMA max_page_count = 1073741823"))

/** Lets the probe fiber run what became due (SQLite statements complete synchronously). */
const settle = Effect.repeatN(Effect.yieldNow(), 50)

describe("store writability", () => {
  it.scoped(
    "after a refused write a probe runs every interval while the store is full, and the first that lands marks it writable",
    () =>
      Effect.gen(function* () {
        const writability = yield* StoreWritability.make({ probeEvery: "5 seconds" })
        assert.isTrue(yield* writability.writable)
        yield* cap
        yield* writability.refused
        for (let i = 0; i < 3; i++) {
          yield* TestClock.adjust("5 seconds")
          yield* settle
          assert.isFalse(yield* writability.writable, `probe ${i + 1} ran on a full store`)
        }
        yield* uncap
        yield* TestClock.adjust("4999 millis")
        yield* settle
        assert.isFalse(yield* writability.writable, "no probe before the interval")
        yield* TestClock.adjust("1 millis")
        yield* settle
        assert.isTrue(yield* writability.writable)
      }).pipe(Effect.provide(store()))
  )

  it.scoped("a client write that lands marks the store writable at once, before any probe", () =>
    Effect.gen(function* () {
      const writability = yield* StoreWritability.make({ probeEvery: "5 seconds" })
      yield* cap
      yield* writability.refused
      yield* writability.landed
      assert.isTrue(yield* writability.writable)
    }).pipe(Effect.provide(store()))
  )

  it.scoped("a probe that dies does not end the probing: the next one that lands marks the store writable", () => {
    // The probe's fault point dies once when armed: a bug in the probe's write, not a refusal.
    const broken = { armed: false }
    const dying = Layer.succeed(StorageFaults, {
      before: () =>
        Effect.suspend(() => {
          if (!broken.armed) return Effect.void
          broken.armed = false
          return Effect.dieMessage("probe bug")
        })
    })
    return Effect.gen(function* () {
      const writability = yield* StoreWritability.make({ probeEvery: "5 seconds" })
      yield* writability.refused
      // given a probe that dies
      broken.armed = true
      yield* TestClock.adjust("5 seconds")
      yield* settle
      assert.isFalse(broken.armed, "the probe ran and died")
      assert.isFalse(yield* writability.writable)
      // when the next interval comes, then its probe lands: the probing lives
      yield* TestClock.adjust("5 seconds")
      yield* settle
      assert.isTrue(yield* writability.writable)
    }).pipe(Effect.provide(Layer.merge(store(), dying)))
  })
})
