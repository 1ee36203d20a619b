/**
 * The processor writes a batch either through the SQLite store's raw connection (SqliteCommitWriter)
 * or through the generic table modules over any SqlClient (the path PostgreSQL takes). Every other
 * suite runs the SQLite store, so the raw path; here the same behaviours run on both, and the two are
 * checked to write the very same rows and answers.
 */
import { SafeIntegers, SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Fiber, Layer } from "effect"
import {
  CommandIdConflict,
  CommandRejected,
  Engine,
  SqliteStore,
  StorageFailure,
  StorageFaults,
  driverError,
  type WritePoint
} from "../src/index.js"
import * as SqliteClient from "../src/storage/SqliteClient.js"
import { writeTransaction } from "../src/storage/Transactions.js"
import { accountsConfig, snapshot, tempDbFile, waitForQueueDepth } from "./fixtures/harness.js"

const open = (commandId: string, accountId = "acc-1", owner = "ada") => ({
  commandId,
  type: "account.open",
  accountId,
  owner
})
const deposit = (commandId: string, amount: number, accountId = "acc-1") => ({
  commandId,
  type: "account.deposit",
  accountId,
  amount
})
const withdraw = (commandId: string, amount: number, accountId = "acc-1") => ({
  commandId,
  type: "account.withdraw",
  accountId,
  amount
})

type Path = "raw" | "generic"

/** The SQLite store, with its raw connection (the fast path) or without it (the generic path). */
const store = (path: Path, filename = ":memory:") =>
  path === "raw"
    ? SqliteStore.layer({ filename })
    : SqliteStore.layer({ filename }).pipe(Layer.map(Context.omit(SqliteClient.SqliteConnection)))

const engineOn = (path: Path, options: { readonly filename?: string; readonly activation?: "manual" } = {}) =>
  Engine.layer({ ...accountsConfig, ...(options.activation ? { activation: options.activation } : {}) }).pipe(
    Layer.provideMerge(store(path, options.filename))
  )

/** Which path the engine under test took, read from the context it was built in. */
const hasRawConnection = Effect.map(Effect.serviceOption(SqliteClient.SqliteConnection), (o) => o._tag === "Some")

const armedFaults = () => {
  const armed: { point: WritePoint | undefined } = { point: undefined }
  const layer = Layer.succeed(StorageFaults, {
    before: (point) =>
      point === armed.point ? Effect.fail(driverError("SQLITE_FULL", `SQLITE_FULL: injected at ${point}`)) : Effect.void
  })
  return { armed, layer }
}

/** A script touching every write of a batch: events, projections, outbox rows, receipts, rejections, duplicates, conflicts. */
const script = Effect.gen(function* () {
  const engine = yield* Engine.Engine
  const answers: Array<unknown> = []
  const record = <A, E>(effect: Effect.Effect<A, E>) =>
    Effect.flatMap(Effect.exit(effect), (exit) => Effect.sync(() => answers.push(exit)))
  yield* record(engine.dispatchWithReceipt(open("c-1")))
  yield* record(engine.dispatchWithReceipt(open("c-1")))
  yield* record(engine.dispatchWithReceipt(open("c-1", "acc-1", "bob")))
  yield* record(engine.dispatchWithReceipt(deposit("d-1", 50)))
  yield* record(engine.dispatchWithReceipt(withdraw("w-1", 500)))
  yield* record(engine.dispatchWithReceipt(withdraw("w-1", 500)))
  yield* record(engine.dispatchWithReceipt({ commandId: "t-1", type: "account.touch", accountId: "acc-1" }))
  yield* record(engine.dispatchWithReceipt({ commandId: "x-1", type: "account.explode", accountId: "acc-1" }))
  // A concurrent group: one transaction with several commands.
  yield* Effect.forEach(
    [open("c-2", "acc-2"), deposit("d-2", 7, "acc-2"), deposit("d-3", 1), withdraw("w-2", 20)],
    (command) => Effect.exit(engine.dispatchWithReceipt(command)),
    { concurrency: "unbounded" }
  ).pipe(Effect.tap((exits) => Effect.sync(() => answers.push(...exits))))
  return answers
})

describe("the raw SQLite commit path and the generic one", () => {
  it.effect("write the same rows and give the same answers for the same commands", () =>
    Effect.gen(function* () {
      const runOn = (path: Path) =>
        Effect.gen(function* () {
          assert.strictEqual(yield* hasRawConnection, path === "raw")
          const answers = yield* script
          return { answers, rows: yield* snapshot }
        }).pipe(Effect.provide(engineOn(path)))
      const raw = yield* runOn("raw")
      const generic = yield* runOn("generic")
      assert.deepStrictEqual(raw.rows, generic.rows)
      assert.deepStrictEqual(raw.answers, generic.answers)
      // The script did write everything it was meant to.
      assert.strictEqual(raw.rows.outbox!.length, 2)
      // c-1, d-1, w-1 (rejected), t-1 and the group's four; the conflict and the defect write none.
      assert.strictEqual(raw.rows.receipts!.length, 8)
      const statuses = raw.answers.map((a) => (Exit.isSuccess(a as Exit.Exit<unknown, unknown>) ? "ok" : "fail"))
      assert.deepStrictEqual(statuses, ["ok", "ok", "fail", "ok", "fail", "fail", "ok", "fail", "ok", "ok", "ok", "ok"])
    })
  )
})

for (const path of ["raw", "generic"] as const) {
  describe(`commit path: ${path}`, () => {
    it.effect(
      "a duplicate is answered from its receipt; another payload under the id is a conflict; nothing is written again",
      () =>
        Effect.gen(function* () {
          const engine = yield* Engine.Engine
          const first = yield* engine.dispatchWithReceipt(open("c-1"))
          const before = yield* snapshot
          const again = yield* engine.dispatchWithReceipt(open("c-1"))
          assert.deepStrictEqual({ ...again, duplicate: false }, first)
          const conflict = yield* Effect.flip(engine.dispatchWithReceipt(open("c-1", "acc-1", "bob")))
          assert.instanceOf(conflict, CommandIdConflict)
          const rejected = yield* Effect.flip(engine.dispatchWithReceipt(deposit("d-1", 5, "acc-9")))
          assert.instanceOf(rejected, CommandRejected)
          const rejectedAgain = yield* Effect.flip(engine.dispatchWithReceipt(deposit("d-1", 5, "acc-9")))
          assert.isTrue(rejectedAgain instanceof CommandRejected && rejectedAgain.duplicate)
          const after = yield* snapshot
          assert.deepStrictEqual({ ...after, receipts: before.receipts! }, before)
          assert.strictEqual(after.receipts!.length, before.receipts!.length + 1)
        }).pipe(Effect.provide(engineOn(path)))
    )

    for (const point of ["events", "projections", "outbox", "receipts"] as const) {
      it.effect(`a storage failure at ${point} fails the command and leaves every table unchanged`, () => {
        const { armed, layer } = armedFaults()
        return Effect.gen(function* () {
          const engine = yield* Engine.Engine
          yield* engine.dispatchWithReceipt(open("c-0", "acc-0"))
          const before = yield* snapshot
          armed.point = point
          const failed = yield* Effect.flip(engine.dispatchWithReceipt(open("c-1")))
          assert.instanceOf(failed, StorageFailure)
          assert.strictEqual((failed as StorageFailure).reason, "disk-full")
          armed.point = undefined
          assert.deepStrictEqual(yield* snapshot, before)
          const retried = yield* engine.dispatchWithReceipt(open("c-1"))
          assert.strictEqual(retried.duplicate, false)
        }).pipe(Effect.provide(engineOn(path).pipe(Layer.provide(layer))))
      })
    }

    it.effect("a real SQLITE_FULL mid-batch fails exactly that command; its batch-mates get their own answers", () => {
      const file = tempDbFile()
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const sql = yield* SqlClient
        // Activate to commit the first command, then fill a parked queue: stopAdmitting is not needed, the processor
        // takes what is queued as one batch because the commands are queued before it runs.
        yield* engine.activate
        yield* engine.dispatchWithReceipt(open("c-1"))
        const [row] = yield* sql<{ page_count: number }>`PRAGMA page_count`
        yield* sql.unsafe(`PRAGMA max_page_count = ${Number(row!.page_count) + 6}`)
        const fibers = yield* Effect.forEach(
          [deposit("d-1", 5), withdraw("w-1", 1_000), open("c-2", "acc-2", "x".repeat(400_000)), deposit("d-2", 1)],
          (command) => Effect.fork(Effect.either(engine.dispatchWithReceipt(command)))
        )
        const [good, rejected, tooBig, good2] = yield* Fiber.joinAll(fibers)
        assert.isTrue(good!._tag === "Right" && good!.right.events.length === 1)
        assert.isTrue(rejected!._tag === "Left" && rejected!.left._tag === "CommandRejected")
        assert.isTrue(
          tooBig!._tag === "Left" && tooBig!.left._tag === "StorageFailure" && tooBig!.left.reason === "disk-full"
        )
        assert.isTrue(good2!._tag === "Right" && good2!.right.events.length === 1)
        const receipts = yield* sql<{
          command_id: string
          status: string
        }>`SELECT command_id, status FROM receipts ORDER BY command_id`
        assert.deepStrictEqual(
          receipts.map((r) => [r.command_id, r.status]),
          [
            ["c-1", "accepted"],
            ["d-1", "accepted"],
            ["d-2", "accepted"],
            ["w-1", "rejected"]
          ]
        )
        const events = yield* sql<{ command_id: string }>`SELECT command_id FROM events ORDER BY sequence`
        assert.deepStrictEqual(
          events.map((e) => e.command_id),
          ["c-1", "d-1", "d-2"]
        )
      }).pipe(Effect.provide(engineOn(path, { filename: file, activation: "manual" })))
    })

    it.effect("a parked queue is committed as one batch; a defect in one command rolls back only that command", () =>
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const fibers = yield* Effect.forEach(
          [open("c-1"), { commandId: "x-1", type: "account.explode", accountId: "acc-1" }, deposit("d-1", 3)],
          (command) => Effect.fork(Effect.exit(engine.dispatchWithReceipt(command)))
        )
        yield* waitForQueueDepth(3)
        yield* engine.activate
        const [opened, exploded, deposited] = yield* Fiber.joinAll(fibers)
        assert.isTrue(Exit.isSuccess(opened!))
        assert.isTrue(Exit.isFailure(exploded!))
        assert.isTrue(Exit.isSuccess(deposited!))
        assert.strictEqual((yield* engine.stats).transactions, 1)
        const rows = yield* snapshot
        assert.deepStrictEqual(rows.receipts!.map((r) => (r as { command_id: string }).command_id).sort(), [
          "c-1",
          "d-1"
        ])
      }).pipe(Effect.provide(engineOn(path, { activation: "manual" })))
    )
  })
}

describe("our SQLite client", () => {
  it.effect("does not cache a failed prepare: a statement refused before its table exists works once it does", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient
      const read = sql<{ n: number }>`SELECT COUNT(*) AS n FROM created_later`
      const refused = yield* Effect.flip(read)
      assert.include(String((refused.cause as Error).message), "no such table")
      yield* sql`CREATE TABLE created_later (id INTEGER)`
      assert.deepStrictEqual(yield* read, [{ n: 0 }])
    }).pipe(Effect.provide(SqliteClient.layer({ filename: ":memory:" })))
  )

  it.effect("offers the raw connection it runs on, so writes through either are one database", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient
      const conn = yield* SqliteClient.SqliteConnection
      yield* sql`CREATE TABLE t (id INTEGER)`
      conn.prepare("INSERT INTO t (id) VALUES (?)").run(7)
      assert.deepStrictEqual(yield* sql`SELECT id FROM t`, [{ id: 7 }])
    }).pipe(Effect.provide(SqliteClient.layer({ filename: ":memory:" })))
  )

  it.effect(
    "runs statements inside a transaction directly, with the same rows, errors and safe integers as outside",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient
        yield* sql`CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)`
        const insert = (k: string, v: number) => sql`INSERT INTO kv ${sql.insert({ k, v })}`
        const read = sql<{ k: string; v: number }>`SELECT k, v FROM kv ORDER BY k`
        yield* insert("a", 1)
        const inside = yield* writeTransaction(
          "test",
          Effect.gen(function* () {
            yield* insert("b", 2)
            const rows = yield* read
            const duplicate = yield* Effect.flip(insert("a", 3))
            const big = yield* Effect.provideService(sql`SELECT 9007199254740993 AS n`, SafeIntegers, true)
            return { rows, duplicate, big }
          })
        )
        assert.deepStrictEqual(inside.rows, [
          { k: "a", v: 1 },
          { k: "b", v: 2 }
        ])
        assert.strictEqual(inside.duplicate._tag, "SqlError")
        assert.strictEqual((inside.duplicate.cause as { code: string }).code, "SQLITE_CONSTRAINT_PRIMARYKEY")
        assert.deepStrictEqual(inside.big, [{ n: 9007199254740993n }])
        // The same statements outside a transaction take @effect/sql's own path and agree.
        assert.deepStrictEqual(yield* read, inside.rows)
        const outside = yield* Effect.flip(insert("a", 3))
        assert.strictEqual((outside.cause as { code: string }).code, "SQLITE_CONSTRAINT_PRIMARYKEY")
      }).pipe(Effect.provide(SqliteClient.layer({ filename: ":memory:" })))
  )

  it("keeps the most recently used prepared statements and drops the oldest", () => {
    const prepared: Array<string> = []
    const db = { prepare: (text: string) => (prepared.push(text), { text }) } as unknown as Parameters<
      typeof SqliteClient.makePrepareCache
    >[0]
    const prepare = SqliteClient.makePrepareCache(db, 2)
    prepare("a")
    prepare("b")
    prepare("a")
    prepare("c") // evicts b, the least recently used
    prepare("a")
    prepare("b")
    assert.deepStrictEqual(prepared, ["a", "b", "c", "b"])
  })
})
