/**
 * The PostgreSQL store's looks at the commit horizon (CommitHorizon.serialLooks in PostgresStore):
 * readers that ask for a table's horizon while a look runs share the next look instead of each
 * running its own. Counted by statement text on real sessions, with a writer held open so every look
 * is the full one (an observation that stays waiting, and the second statement that re-checks it).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer } from "effect"
import * as CommitHorizon from "../../src/storage/CommitHorizon.js"
import { StoreBackend } from "../../src/storage/StoreBackend.js"
import * as TestStore from "../../src/testing/TestStore.js"

describe("looks at the commit horizon", () => {
  it.scopedLive(
    "eight readers asking at once under a held writer share looks, and see the horizon move once it commits",
    () =>
      Effect.gen(function* () {
        const store = yield* Layer.build(TestStore.layer())
        const sql = yield* Effect.provide(SqlClient, store)
        const backend = yield* Effect.provide(StoreBackend, store)
        const schema = (yield* sql<{ schema: string }>`SELECT current_schema() AS schema`)[0]!.schema
        yield* sql`CREATE TABLE events (sequence BIGSERIAL PRIMARY KEY)`
        // given a writer of the schema holding sequence 1 uncommitted, and sequence 2 committed after it began
        const holding = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const writer = yield* Effect.fork(
          sql.withTransaction(
            Effect.gen(function* () {
              yield* sql.unsafe(CommitHorizon.WRITER_XID_FIRST, [CommitHorizon.writersName(schema)])
              yield* sql`INSERT INTO events DEFAULT VALUES`
              yield* Deferred.succeed(holding, undefined)
              yield* Deferred.await(release)
            })
          )
        )
        yield* Deferred.await(holding)
        yield* sql`INSERT INTO events DEFAULT VALUES`
        // when eight readers ask for the horizon at once, counting the observation statements they run
        let looks = 0
        const counted = Statement.withTransformer((statement) =>
          Effect.sync(() => {
            if (statement.compile()[0].includes("FROM pg_locks")) looks += 1
            return statement
          })
        )
        const views = yield* counted(
          Effect.all(
            Array.from({ length: 8 }, () => Effect.provide(backend.horizon("events"), store)),
            {
              concurrency: "unbounded"
            }
          )
        )
        // then none trusts anything yet (sequence 1 may still commit), each knows rows wait above,
        // and they ran the statements of two looks at most (one each would be 8 looks, 16 statements)
        for (const view of views) assert.deepStrictEqual(view, { trusted: 0, waiting: true })
        assert.isAtMost(looks, 4)
        // and once the writer commits, the next reader trusts both rows
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(writer)
        assert.deepStrictEqual(yield* Effect.provide(backend.horizon("events"), store), { trusted: 2, waiting: false })
      })
  )

  it.scopedLive(
    "a look that trusts what waited also covers the rows committed since (a reader woken by their hint is not left without a recheck)",
    () =>
      Effect.gen(function* () {
        const store = yield* Layer.build(TestStore.layer())
        const sql = yield* Effect.provide(SqlClient, store)
        const backend = yield* Effect.provide(StoreBackend, store)
        const horizon = Effect.provide(backend.horizon("events"), store)
        const schema = (yield* sql<{ schema: string }>`SELECT current_schema() AS schema`)[0]!.schema
        yield* sql`CREATE TABLE events (sequence BIGSERIAL PRIMARY KEY)`
        // given a writer holding sequence 1 open, and sequence 2 committed: the horizon waits on 2
        const holding = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const writer = yield* Effect.fork(
          sql.withTransaction(
            Effect.gen(function* () {
              yield* sql.unsafe(CommitHorizon.WRITER_XID_FIRST, [CommitHorizon.writersName(schema)])
              yield* sql`INSERT INTO events DEFAULT VALUES`
              yield* Deferred.succeed(holding, undefined)
              yield* Deferred.await(release)
            })
          )
        )
        yield* Deferred.await(holding)
        yield* sql`INSERT INTO events DEFAULT VALUES`
        assert.deepStrictEqual(yield* horizon, { trusted: 0, waiting: true })
        // when the writer commits, sequence 3 commits after it (its hint wakes a reader), and the reader looks
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(writer)
        yield* sql`INSERT INTO events DEFAULT VALUES`
        // then the reader's horizon reaches 3, or says rows wait (so it looks again without another hint)
        const view = yield* horizon
        assert.isTrue(view.trusted === 3 || view.waiting, `3 committed before the look; got ${JSON.stringify(view)}`)
      })
  )
})
