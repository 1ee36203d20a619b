/**
 * Several engines on one PostgreSQL schema, as several server processes would be: each has its own
 * connection pool, state cache and processor, and they meet only in the database. Runs in the
 * PostgreSQL conformance run (vitest.postgres.config.ts).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Cause, type Context, Deferred, Effect, Exit, Fiber, Layer, Option, Stream } from "effect"
import { createServer, connect, type Server, type Socket } from "node:net"
import { Engine, FaultPoints, PostgresStore } from "../../src/index.js"
import * as TestStore from "../../src/testing/TestStore.js"
import { accountsConfig, engineLayer, tempDbFile } from "../fixtures/harness.js"

const open = (commandId: string, accountId: string) => ({ commandId, type: "account.open", accountId, owner: "ada" })
const deposit = (commandId: string, accountId: string, amount: number) => ({
  commandId,
  type: "account.deposit",
  accountId,
  amount
})

/** Real time for network round trips (never the TestClock): PostgreSQL answers asynchronously. */
const wait = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))

const engineIn = (context: Context.Context<any>) => Effect.provide(Engine.Engine, context)

/** Two engines, as two processes would run them, on one new store (and that store's name). */
const twoEnginesOnOneStore = Effect.suspend(() => {
  const file = tempDbFile()
  return Effect.all([
    Effect.flatMap(Layer.build(engineLayer({ filename: file })), engineIn),
    Effect.flatMap(Layer.build(engineLayer({ filename: file })), engineIn),
    Effect.succeed(file)
  ])
})

describe("commit order across processes", () => {
  it.scoped(
    "issue 20: A's transaction held open while B commits; B's readers see B at once, the log's readers see A and B once A commits, nothing skipped",
    () =>
      Effect.gen(function* () {
        const file = tempDbFile()
        const holding = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        let held = false
        // Engine A stops inside its dispatch transaction, after its events were inserted, before COMMIT.
        const holdBeforeCommit = Layer.succeed(FaultPoints.FaultPoints, {
          enabled: true,
          hit: (point) =>
            point === "dispatch.before-commit" && !held
              ? Effect.zipRight(
                  Effect.sync(() => (held = true)),
                  Deferred.succeed(holding, undefined)
                ).pipe(Effect.zipRight(Deferred.await(release)))
              : Effect.void
        })
        const a = yield* Layer.build(engineLayer({ filename: file }).pipe(Layer.provide(holdBeforeCommit)))
        const b = yield* Layer.build(engineLayer({ filename: file }))
        const engineA = yield* engineIn(a)
        const engineB = yield* engineIn(b)
        // Whatever fails below, A's transaction is let go, so the scope can close.
        yield* Effect.addFinalizer(() => Deferred.succeed(release, undefined))

        // Followers on engine B, started before anything is written: the whole log, and aggregate acc-b.
        const seen: Array<number> = []
        const seenOfB: Array<number> = []
        yield* Effect.forkScoped(
          Stream.runForEach(engineB.followEvents(), (e) => Effect.sync(() => seen.push(e.sequence)))
        )
        yield* Effect.forkScoped(
          Stream.runForEach(engineB.followEvents({ aggregateId: "acc-b", aggregateType: "account" }), (e) =>
            Effect.sync(() => seenOfB.push(e.sequence))
          )
        )

        const first = yield* Effect.fork(engineA.dispatchWithReceipt(open("open-a", "acc-a")))
        yield* Deferred.await(holding)
        // A's sequence is handed out and its transaction open: B, another aggregate, does not wait for it.
        const answerB = yield* engineB.dispatchWithReceipt(open("open-b", "acc-b"))
        const until = (done: () => boolean) =>
          Effect.gen(function* () {
            const deadline = Date.now() + 10_000
            while (!done() && Date.now() < deadline) yield* wait(20)
          })
        yield* until(() => seenOfB.length > 0)
        assert.deepStrictEqual(seenOfB, [answerB.sequence])
        // The log's readers do not pass A's open row below B's: they see nothing yet.
        yield* wait(300)
        assert.deepStrictEqual(seen, [])
        assert.deepStrictEqual(
          (yield* engineB.readEvents()).map((e) => e.sequence),
          []
        )

        yield* Deferred.succeed(release, undefined)
        const answerA = yield* Fiber.join(first)
        assert.isBelow(answerA.sequence, answerB.sequence)
        yield* until(() => seen.length >= 2)
        // Every event once, in sequence order: the late commit was waited for, not skipped.
        assert.deepStrictEqual(seen, [answerA.sequence, answerB.sequence])
        assert.deepStrictEqual(
          (yield* engineA.readEvents()).map((e) => e.commandId),
          ["open-a", "open-b"]
        )
      })
  )
})

describe("one receipt per command across processes", () => {
  it.scoped("concurrent duplicates sent to two engines commit once; the loser gets the winner's answer", () =>
    Effect.gen(function* () {
      const [engineA, engineB, file] = yield* twoEnginesOnOneStore
      const ids = Array.from({ length: 20 }, (_, i) => `dup-${i}`)
      const answers = yield* Effect.forEach(
        ids,
        (id, i) =>
          Effect.all(
            [engineA.dispatchWithReceipt(open(id, `acc-${i}`)), engineB.dispatchWithReceipt(open(id, `acc-${i}`))],
            { concurrency: 2 }
          ),
        { concurrency: "unbounded" }
      )
      for (const [first, second] of answers) {
        assert.strictEqual(first.sequence, second.sequence)
        assert.deepStrictEqual([first.duplicate, second.duplicate].sort(), [false, true])
      }
      const sql = yield* Effect.provide(SqlClient, yield* Layer.build(TestStore.layer({ filename: file })))
      const counts = yield* sql<{ events: number; receipts: number }>`
        SELECT (SELECT COUNT(*) FROM events) AS events, (SELECT COUNT(*) FROM receipts) AS receipts`
      assert.deepStrictEqual(counts[0], { events: 20, receipts: 20 })
      // The same id with another payload, on the other engine, is a conflict.
      const conflict = yield* Effect.exit(engineB.dispatchWithReceipt(open("dup-0", "another-account")))
      assert.isTrue(
        Exit.isFailure(conflict) &&
          Cause.failureOption(conflict.cause).pipe(
            Option.map((e) => e._tag),
            Option.getOrUndefined
          ) === "CommandIdConflict"
      )
    })
  )

  it.scoped("an aggregate written by two engines in turn never decides on stale cached state", () =>
    Effect.gen(function* () {
      const [engineA, engineB, file] = yield* twoEnginesOnOneStore
      yield* engineA.dispatchWithReceipt(open("open-1", "shared"))
      for (let i = 0; i < 10; i++) {
        const engine = i % 2 === 0 ? engineB : engineA
        yield* engine.dispatchWithReceipt(deposit(`deposit-${i}`, "shared", 10))
      }
      const events = yield* engineA.readEvents({ aggregateId: "shared" })
      assert.deepStrictEqual(
        events.map((e) => e.version),
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
      )
      const sql = yield* Effect.provide(SqlClient, yield* Layer.build(TestStore.layer({ filename: file })))
      const balance = yield* sql<{ balance: number }>`SELECT balance FROM account_balances WHERE account_id = 'shared'`
      assert.strictEqual(Number(balance[0]!.balance), 100)
    })
  )
})

/**
 * A TCP proxy in front of PostgreSQL that, when armed, forwards one COMMIT and then cuts the client's
 * connection before the answer comes back: the commit happened, the client cannot know.
 */
const commitCuttingProxy = Effect.acquireRelease(
  Effect.async<{
    readonly server: Server
    readonly port: number
    readonly arm: () => void
    readonly cuts: () => number
  }>((resume) => {
    let armed = false
    let cuts = 0
    const sockets = new Set<Socket>()
    const server = createServer((client) => {
      const upstream = connect(5432, "127.0.0.1")
      sockets.add(client)
      sockets.add(upstream)
      upstream.on("data", (chunk) => client.writable && client.write(chunk))
      client.on("data", (chunk: Buffer) => {
        // A simple-protocol Query message: 'Q', int32 length, the SQL text, NUL.
        const isCommit =
          chunk[0] === 0x51 && chunk.subarray(5).toString("utf8").replace(/\0+$/, "").trim().toUpperCase() === "COMMIT"
        upstream.write(chunk)
        if (isCommit && armed) {
          armed = false
          cuts++
          client.destroy()
          setTimeout(() => upstream.end(), 200)
        }
      })
      client.on("error", () => upstream.destroy())
      upstream.on("error", () => client.destroy())
      client.on("close", () => setTimeout(() => upstream.destroy(), 200))
    })
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      resume(Effect.succeed({ server, port, arm: () => (armed = true), cuts: () => cuts }))
    })
  }),
  ({ server }) =>
    Effect.async<void>((resume) => {
      server.close(() => resume(Effect.void))
    })
)

describe("ambiguous commits", () => {
  it.scoped(
    "a connection lost after COMMIT was sent fails the command; the retry with the same id finds the receipt",
    () =>
      Effect.gen(function* () {
        const proxy = yield* commitCuttingProxy
        const url = new URL(TestStore.testDatabaseUrl())
        url.port = String(proxy.port)
        const schema = TestStore.freshSchema()
        const store = PostgresStore.layer({ url: url.toString(), schema, maxConnections: 2 })
        const engine = yield* engineIn(yield* Layer.build(Engine.layer(accountsConfig).pipe(Layer.provideMerge(store))))
        yield* engine.dispatchWithReceipt(open("open-1", "acc-1"))

        proxy.arm()
        const cut = yield* Effect.exit(engine.dispatchWithReceipt(deposit("deposit-1", "acc-1", 25)))
        assert.strictEqual(proxy.cuts(), 1)
        // The client is told the truth it has: the write's fate is unknown to the engine, a typed storage failure.
        assert.isTrue(Exit.isFailure(cut))
        const failure = Exit.isFailure(cut) ? Option.getOrUndefined(Cause.failureOption(cut.cause)) : undefined
        assert.strictEqual(failure?._tag, "StorageFailure")

        // The retry with the same command id: the commit did land, so its receipt answers, once.
        const retry = yield* engine.dispatchWithReceipt(deposit("deposit-1", "acc-1", 25))
        assert.isTrue(retry.duplicate)
        assert.deepStrictEqual(
          retry.events.map((e) => e.type),
          ["account.deposited"]
        )
        // And the engine's next decision on that aggregate sees the committed deposit (no stale cache).
        const next = yield* engine.dispatchWithReceipt(deposit("deposit-2", "acc-1", 5))
        assert.strictEqual(next.events[0]!.version, 3)
        const deposits = (yield* engine.readEvents({ aggregateId: "acc-1" })).filter(
          (e) => e.type === "account.deposited"
        )
        assert.deepStrictEqual(
          deposits.map((e) => e.commandId),
          ["deposit-1", "deposit-2"]
        )
      })
  )
})

describe("aggregate hints across processes", () => {
  it.scoped("ringAggregate on one engine wakes another engine's readers of that aggregate, with no commit", () =>
    Effect.gen(function* () {
      const [engineA, engineB] = yield* twoEnginesOnOneStore
      let rings = 0
      yield* Effect.forkScoped(
        Stream.runForEach(yield* engineB.aggregateChanges("account", "acc-r"), () => Effect.sync(() => rings++))
      )
      const until = (what: string, condition: () => boolean) =>
        Effect.gen(function* () {
          const deadline = Date.now() + 10_000
          while (!condition() && Date.now() < deadline) yield* wait(20)
          assert.isTrue(condition(), what)
        })
      // A commit of A reaches B through LISTEN: B's listener is up.
      yield* engineA.dispatchWithReceipt(open("open-r", "acc-r"))
      yield* until("B hears A's commit", () => rings > 0)
      yield* wait(200)
      const before = rings
      // A performer's word that it stopped is a row update, not a command: it rings by itself.
      yield* engineA.ringAggregate("account", "acc-r")
      yield* until("B hears A's ring", () => rings > before)
    })
  )
})
