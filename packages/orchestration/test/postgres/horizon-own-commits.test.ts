/**
 * The events horizon after this process's own commits (PostgresStore: StoreBackend.ownCommit): a
 * dispatch batch that was the schema's only writer until its COMMIT (it took the writers' lock
 * exclusively, CommitHorizon.WRITERS_ALONE) moves the horizon to its head, so the readers it rings
 * need no look. Anything the process cannot vouch for makes the next read look again: a commit that
 * was not alone, another process's hint, a caller that needs a newer head, and a LISTEN session that
 * is down (foreign commits would then go unhinted). The outbox's horizon moves the same way. Counted by
 * statement text on real sessions.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Stream } from "effect"
import { Engine } from "../../src/index.js"
import { StoreBackend } from "../../src/storage/StoreBackend.js"
import * as TestStore from "../../src/testing/TestStore.js"
import { submit } from "../fixtures/Jobs.js"
import { scriptedHandler, stack, testReactor } from "../fixtures/reactors.js"

/** Runs `body`, answering how many commit-horizon looks (their pg_locks statements) it ran. */
const countingLooks = <A, E, R>(body: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    let looks = 0
    const value = yield* Statement.withTransformer((statement) =>
      Effect.sync(() => {
        if (statement.compile()[0].includes("FROM pg_locks")) looks += 1
        return statement
      })
    )(body)
    return { value, looks }
  })

/** Polls `condition` with real time, bounded. */
const within = <E, R>(ms: number, condition: Effect.Effect<boolean, E, R>) =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    while (Date.now() < deadline) {
      if (yield* condition) return true
      yield* Effect.sleep("10 millis")
    }
    return false
  })

/**
 * A store whose `events` table holds sequence 1, with its LISTEN session up (as the engine keeps it) and
 * its hints counted: the conditions under which a read after an alone commit may answer without a look.
 */
const listeningStore = Effect.gen(function* () {
  const store = yield* Layer.build(TestStore.layer())
  const sql = yield* Effect.provide(SqlClient, store)
  const backend = yield* Effect.provide(StoreBackend, store)
  yield* sql`CREATE TABLE events (sequence BIGSERIAL PRIMARY KEY)`
  yield* sql`INSERT INTO events DEFAULT VALUES`
  const counted = { hints: 0 }
  yield* Effect.forkScoped(
    Stream.runForEach(backend.foreignCommitHints, () =>
      Effect.sync(() => {
        counted.hints += 1
      })
    ).pipe(Effect.ignore)
  )
  assert.isTrue(
    yield* within(
      5_000,
      Effect.sync(() => counted.hints >= 1)
    ),
    "the LISTEN session opened"
  )
  const horizon = (atLeast?: number) => Effect.provide(backend.horizon("events", atLeast), store)
  return { store, sql, backend, horizon, counted }
})

describe("the events horizon after this process's own commits", () => {
  it.scopedLive("an engine's readers read what its alone batches committed without a look", () => {
    const handler = scriptedHandler()
    return Effect.gen(function* () {
      const context = yield* Layer.build(stack([testReactor(handler.handle)]))
      const engine = yield* Effect.provide(Engine.Engine, context)
      // The first batch and read may look (the LISTEN session opens in the background).
      yield* engine.dispatchWithReceipt(submit("warm", "work.safe"))
      yield* engine.readEvents()
      // Each batch writes an effect row, so it claims at commit: alone, it moves the horizon itself.
      const { looks, value } = yield* countingLooks(
        Effect.forEach(["a", "b", "c", "d"], (id) =>
          Effect.zipRight(
            engine.dispatchWithReceipt(submit(id, "work.safe")),
            Effect.map(engine.readEvents({ limit: 10_000 }), (events) => events.some((e) => e.aggregateId === id))
          )
        )
      )
      // Every read sees the job just submitted, and none of them looked.
      assert.deepStrictEqual(value, [true, true, true, true])
      assert.strictEqual(looks, 0)
      // The outbox's horizon (the reactor's claims read up to it) moved with the same commits: it covers
      // every effect row, without a look.
      const sql = yield* Effect.provide(SqlClient, context)
      const backend = yield* Effect.provide(StoreBackend, context)
      const [{ newest }] = (yield* sql<{ newest: string }>`SELECT MAX(sequence) AS newest FROM outbox`) as [
        { newest: string }
      ]
      const outbox = yield* countingLooks(Effect.provide(backend.horizon("outbox"), context))
      assert.deepStrictEqual([outbox.value, outbox.looks], [{ trusted: Number(newest), waiting: false }, 0])
    })
  })

  it.scopedLive(
    "a commit that was not alone, a foreign hint, a newer head or a LISTEN down each make the next read look",
    () =>
      Effect.gen(function* () {
        // given the store's LISTEN session up (as the engine keeps it), counting its hints
        const { sql, backend, horizon, counted } = yield* listeningStore
        const schema = (yield* sql<{ schema: string }>`SELECT current_schema() AS schema`)[0]!.schema
        assert.deepStrictEqual((yield* countingLooks(horizon())).value, { trusted: 1, waiting: false })
        // when this process commits sequence 2 alone, the next read trusts it without a look
        yield* sql`INSERT INTO events DEFAULT VALUES`
        yield* backend.ownCommit({ events: 2, outbox: 0 })
        const alone = yield* countingLooks(horizon())
        assert.deepStrictEqual([alone.value, alone.looks], [{ trusted: 2, waiting: false }, 0])
        // a caller that read a newer head looks
        yield* sql`INSERT INTO events DEFAULT VALUES`
        const newer = yield* countingLooks(horizon(3))
        assert.deepStrictEqual(newer.value, { trusted: 3, waiting: false })
        assert.isAbove(newer.looks, 0)
        assert.strictEqual((yield* countingLooks(horizon())).looks, 0, "covered again after that look")
        // a commit of this process that was not alone: the next read looks
        yield* sql`INSERT INTO events DEFAULT VALUES`
        yield* backend.ownCommit(undefined)
        const notAlone = yield* countingLooks(horizon())
        assert.deepStrictEqual(notAlone.value, { trusted: 4, waiting: false })
        assert.isAbove(notAlone.looks, 0)
        // another process's commit, once its hint is here: the next read looks
        yield* sql`INSERT INTO events DEFAULT VALUES`
        const before = counted.hints
        yield* sql`SELECT pg_notify(${`orchestration_${schema}`}, 'another-process')`
        assert.isTrue(
          yield* within(
            5_000,
            Effect.sync(() => counted.hints > before)
          ),
          "the hint arrived"
        )
        const foreign = yield* countingLooks(horizon())
        assert.deepStrictEqual(foreign.value, { trusted: 5, waiting: false })
        assert.isAbove(foreign.looks, 0)
        // the LISTEN session lost: foreign commits would go unhinted, so every read looks until it is back
        yield* sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE pid <> pg_backend_pid() AND query LIKE ${`LISTEN "orchestration_${schema}"%`}`
        yield* Effect.sleep("200 millis")
        yield* backend.ownCommit({ events: 5, outbox: 0 })
        const down = yield* countingLooks(horizon())
        assert.isAbove(down.looks, 0)
      })
  )
  it.scopedLive("a look in flight when an alone commit moves the horizon does not move it back", () =>
    Effect.gen(function* () {
      // given the LISTEN session up, so a read after an alone commit may answer without a look
      const { store, sql, backend, horizon } = yield* listeningStore
      assert.deepStrictEqual(yield* horizon(), { trusted: 1, waiting: false })
      // and a reader's look whose statement has run (it saw sequence 1) but whose answer is not in yet
      const statementRan = yield* Deferred.make<void>()
      const answer = yield* Deferred.make<void>()
      const held = Object.assign(Object.create(sql), {
        unsafe: (text: string, params?: ReadonlyArray<unknown>) =>
          text.includes("FROM pg_locks")
            ? Effect.zipLeft(
                sql.unsafe(text, params),
                Effect.zipRight(Deferred.succeed(statementRan, undefined), Deferred.await(answer))
              )
            : sql.unsafe(text, params)
      }) as SqlClient
      const look = yield* Effect.fork(
        Effect.provide(
          backend.horizon("events", Number.POSITIVE_INFINITY).pipe(Effect.provideService(SqlClient, held)),
          store
        )
      )
      yield* Deferred.await(statementRan)
      // when this process commits sequence 2 alone meanwhile (the commit then rings its readers)
      yield* sql`INSERT INTO events DEFAULT VALUES`
      yield* backend.ownCommit({ events: 2, outbox: 0 })
      yield* Deferred.succeed(answer, undefined)
      yield* Fiber.join(look)
      // then a reader the commit rang reads sequence 2: the older look's answer did not replace the
      // commit's horizon (it did: the reader then read without a look, below the row, until its poll)
      const rung = yield* countingLooks(horizon())
      assert.deepStrictEqual(rung.value, { trusted: 2, waiting: false })
    })
  )
})
