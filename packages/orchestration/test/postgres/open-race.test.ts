/**
 * Several processes opening one new schema at once (three server processes started together on a
 * fresh database): each must open it, none may fail on the others' creation of it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer } from "effect"
import { randomUUID } from "node:crypto"
import pg from "pg"
import { Engine, PostgresStore } from "../../src/index.js"
import * as TestStore from "../../src/testing/TestStore.js"
import { accountsConfig } from "../fixtures/harness.js"

const node = (schema: string) =>
  Engine.layer(accountsConfig).pipe(
    Layer.provideMerge(
      PostgresStore.layer({ url: TestStore.testDatabaseUrl(), schema, maxConnections: 2, applicationName: "open-race" })
    )
  )

const dropSchema = (schema: string) =>
  Effect.promise(async () => {
    const admin = new pg.Client({ connectionString: TestStore.testDatabaseUrl() })
    await admin.connect()
    try {
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
    } finally {
      await admin.end()
    }
  })

describe("opening a new schema from several processes at once", () => {
  it.live(
    "every opener succeeds (CREATE SCHEMA IF NOT EXISTS alone races: the loser fails on pg_namespace's unique index)",
    () =>
      Effect.gen(function* () {
        const failures: Array<string> = []
        for (let round = 0; round < 10; round++) {
          const schema = `open_race_${randomUUID().replaceAll("-", "").slice(0, 12)}`
          const exits = yield* Effect.all(
            Array.from({ length: 6 }, () => Effect.exit(Effect.scoped(Layer.build(node(schema))))),
            { concurrency: "unbounded" }
          )
          for (const exit of exits) if (Exit.isFailure(exit)) failures.push(String(exit.cause).slice(0, 300))
          yield* dropSchema(schema)
        }
        assert.deepStrictEqual(failures, [])
      }),
    60_000
  )
})
