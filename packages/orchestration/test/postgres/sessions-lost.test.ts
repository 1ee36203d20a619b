/**
 * The two sessions a PostgreSQL node keeps for its lifetime, lost under it (pg_terminate_backend, as
 * a network cut or a server-side kill would): the node-id lock must not silently lapse, and a LISTEN
 * that is re-opened must make followers look again for what they missed.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Layer, Option, Stream } from "effect"
import { randomUUID } from "node:crypto"
import pg from "pg"
import { Engine, type NodeIdInUse, PostgresStore, Worker } from "../../src/index.js"
import * as TestStore from "../../src/testing/TestStore.js"
import { accountsConfig } from "../fixtures/harness.js"
import { blockedBehind, wait } from "./sessions.js"

const open = (commandId: string, accountId: string) => ({ commandId, type: "account.open", accountId, owner: "ada" })

/** A node on `schema`: its own pool, its sessions named after `app` so the test can find them. */
const nodeStore = (schema: string, app: string, onNodeIdLost?: (error: NodeIdInUse) => Effect.Effect<void>) =>
  PostgresStore.layer({
    url: TestStore.testDatabaseUrl(),
    schema,
    maxConnections: 3,
    applicationName: app,
    ...(onNodeIdLost === undefined ? {} : { onNodeIdLost })
  })

const nodeWithWorker = (
  schema: string,
  app: string,
  nodeId: string,
  onNodeIdLost?: (error: NodeIdInUse) => Effect.Effect<void>
) =>
  Worker.layer({ nodeId }).pipe(
    Layer.provideMerge(Engine.layer(accountsConfig).pipe(Layer.provideMerge(nodeStore(schema, app, onNodeIdLost))))
  )

/** Polls `condition` with real time, bounded; false when it never held. */
const within = <E, R>(ms: number, condition: Effect.Effect<boolean, E, R>) =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    while (Date.now() < deadline) {
      if (yield* condition) return true
      yield* wait(20)
    }
    return false
  })

/** Backends of this node (by application name) holding an advisory lock. */
const lockHolders = (sql: SqlClient, app: string) =>
  sql<{ pid: number }>`SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.locktype = 'advisory' AND l.granted AND a.application_name LIKE ${`${app}%`}`.pipe(
    Effect.map((rows) => rows.map((r) => Number(r.pid)))
  )

const terminate = (sql: SqlClient, pid: number) =>
  Effect.gen(function* () {
    yield* sql`SELECT pg_terminate_backend(${pid})`
    const gone = yield* within(
      10_000,
      Effect.map(
        sql<{ n: number }>`SELECT COUNT(*) AS n FROM pg_stat_activity WHERE pid = ${pid}`,
        (r) => Number(r[0]!.n) === 0
      )
    )
    assert.isTrue(gone, `backend ${pid} did not end`)
  })

const admin = Effect.flatMap(Layer.build(TestStore.layer()), (context) => Effect.provide(SqlClient, context))

describe("the node-id lock session", () => {
  it.scopedLive(
    "lost under a live node, it is taken again at once: a second process with the same NODE_ID is still refused",
    () =>
      Effect.gen(function* () {
        const schema = TestStore.freshSchema()
        const app = `nid-${randomUUID().slice(0, 8)}`
        const sql = yield* admin
        yield* Layer.build(nodeWithWorker(schema, app, "n1", () => Effect.void))
        const [holder] = yield* lockHolders(sql, app)
        assert.isDefined(holder)
        yield* terminate(sql, holder!)
        // The node takes its lock again on a new session (bounded wait; the assertion below is the test).
        yield* within(
          10_000,
          Effect.map(lockHolders(sql, app), (pids) => pids.length === 1)
        )
        const second = yield* Effect.exit(Layer.build(nodeWithWorker(schema, `${app}-second`, "n1")))
        assert.isTrue(Exit.isFailure(second), "a second process took the node id of a live one")
        const error = Exit.isFailure(second) ? Option.getOrUndefined(Cause.failureOption(second.cause)) : undefined
        assert.strictEqual(error?._tag, "NodeIdInUse")
      })
  )

  it.scopedLive("lost while another process takes the id, the node is told that it must stop", () =>
    Effect.gen(function* () {
      const schema = TestStore.freshSchema()
      const app = `nid-${randomUUID().slice(0, 8)}`
      const sql = yield* admin
      const lost = yield* Deferred.make<NodeIdInUse>()
      yield* Layer.build(nodeWithWorker(schema, app, "n1", (error) => Deferred.succeed(lost, error)))
      const [holder] = yield* lockHolders(sql, app)
      // Another session queues for the same lock; it gets it the moment the holder's session ends.
      const other = new pg.Client({ connectionString: TestStore.testDatabaseUrl() })
      yield* Effect.acquireRelease(
        Effect.promise(() => other.connect()),
        () => Effect.promise(() => other.end())
      )
      const taken = other.query("SELECT pg_advisory_lock(hashtext($1))", [`orchestration:${schema}:node:n1`])
      yield* blockedBehind(sql, holder!, "the other session queues for the node id")
      yield* terminate(sql, holder!)
      yield* Effect.promise(() => taken)
      const told = yield* Deferred.await(lost).pipe(Effect.timeout("15 seconds"), Effect.option)
      assert.isTrue(Option.isSome(told), "the node was never told it lost its node id")
      assert.strictEqual(Option.getOrUndefined(told)?.nodeId, "n1")
    })
  )
})

describe("the LISTEN session", () => {
  it.scopedLive("re-opened after it was lost, followers see another process's commit made while nobody listened", () =>
    Effect.gen(function* () {
      const schema = TestStore.freshSchema()
      const appB = `lsn-${randomUUID().slice(0, 8)}`
      const sql = yield* admin
      const a = yield* Effect.provide(
        Engine.Engine,
        yield* Layer.build(Engine.layer(accountsConfig).pipe(Layer.provideMerge(nodeStore(schema, `${appB}-a`))))
      )
      const b = yield* Effect.provide(
        Engine.Engine,
        yield* Layer.build(Engine.layer(accountsConfig).pipe(Layer.provideMerge(nodeStore(schema, appB))))
      )
      const seen: Array<string> = []
      yield* Effect.forkScoped(Stream.runForEach(b.followEvents(), (e) => Effect.sync(() => seen.push(e.commandId))))
      yield* a.dispatchWithReceipt(open("open-1", "acc-1"))
      assert.isTrue(
        yield* within(
          10_000,
          Effect.sync(() => seen.length === 1)
        ),
        "B's follower never saw A's first commit"
      )

      const listener = yield* sql<{ pid: number }>`SELECT pid FROM pg_stat_activity
        WHERE application_name LIKE ${`${appB}%`} AND application_name NOT LIKE ${`${appB}-a%`} AND query LIKE 'LISTEN%'`
      assert.strictEqual(listener.length, 1)
      yield* terminate(sql, Number(listener[0]!.pid))
      // Committed while B has no LISTEN session: nobody is rung for it.
      yield* a.dispatchWithReceipt(open("open-2", "acc-2"))
      const caughtUp = yield* within(
        15_000,
        Effect.sync(() => seen.length === 2)
      )
      assert.isTrue(caughtUp, "B's follower missed A's commit made while its LISTEN was down")
      assert.deepStrictEqual(seen, ["open-1", "open-2"])
    })
  )
})
