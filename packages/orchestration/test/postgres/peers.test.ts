/**
 * Two nodes on one PostgreSQL schema, each with its own pool: claims never hand one row to both or
 * make one wait for the other, and a node that boots leaves a live peer's running rows alone.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Option } from "effect"
import { Boot, Engine } from "../../src/index.js"
import * as Outbox from "../../src/Outbox.js"
import * as TestStore from "../../src/testing/TestStore.js"
import { jobsConfig, submit } from "../fixtures/Jobs.js"
import { tempDbFile } from "../fixtures/harness.js"
import { eventually, gated, scriptedHandler, testReactor } from "../fixtures/reactors.js"
import { wait } from "./sessions.js"

const kinds = ["work.safe"]

describe("claims from two nodes", () => {
  it.scopedLive("a claim skips rows another node's open claim holds: it neither waits nor takes them", () =>
    Effect.gen(function* () {
      const file = tempDbFile()
      const storeA = yield* Layer.build(TestStore.layer({ filename: file }))
      const storeB = yield* Layer.build(TestStore.layer({ filename: file }))
      const sqlA = yield* Effect.provide(SqlClient, storeA)
      const engine = yield* Effect.provide(
        Engine.Engine,
        yield* Layer.build(
          Engine.layer({ ...jobsConfig, activation: "on-start" }).pipe(Layer.provide(Layer.succeedContext(storeA)))
        )
      )
      // Five due rows, each in its own lane.
      for (const id of ["j1", "j2", "j3", "j4", "j5"]) yield* engine.dispatchWithReceipt(submit(id, "work.safe"))
      const now = Date.now()

      // Node A's claim of two rows, its transaction still open.
      const claimedA = yield* Deferred.make<{ readonly pid: number; readonly ids: ReadonlyArray<string> }>()
      const commitA = yield* Deferred.make<void>()
      const a = yield* Effect.fork(
        sqlA
          .withTransaction(
            Effect.gen(function* () {
              const pid = (yield* sqlA<{ pid: number }>`SELECT pg_backend_pid() AS pid`)[0]!.pid
              const rows = yield* Outbox.claim({ kinds, owner: "owner-A", now, leaseMs: 30_000, limit: 2, after: 0 })
              yield* Deferred.succeed(claimedA, { pid: Number(pid), ids: rows.map((r) => r.effectId) })
              yield* Deferred.await(commitA)
            })
          )
          .pipe(Effect.provide(storeA))
      )
      const heldByA = yield* Deferred.await(claimedA)
      assert.strictEqual(heldByA.ids.length, 2)

      // Node B claims everything it can meanwhile: it must answer without waiting for A.
      const b = yield* Effect.fork(
        Effect.provide(Outbox.claim({ kinds, owner: "owner-B", now, leaseMs: 30_000, limit: 10, after: 0 }), storeB)
      )
      let answered: Option.Option<ReadonlyArray<Outbox.OutboxRow>> = Option.none()
      const deadline = Date.now() + 15_000
      while (Option.isNone(answered) && Date.now() < deadline) {
        const blocked = yield* sqlA<{
          n: number
        }>`SELECT COUNT(*) AS n FROM pg_stat_activity WHERE ${heldByA.pid} = ANY(pg_blocking_pids(pid))`
        assert.strictEqual(Number(blocked[0]!.n), 0, "node B's claim waits for node A's open claim")
        const polled = yield* Fiber.poll(b)
        if (Option.isSome(polled)) answered = Option.some(yield* polled.value)
        else yield* wait(10)
      }
      assert.isTrue(Option.isSome(answered), "node B's claim never answered")
      yield* Deferred.succeed(commitA, undefined)
      yield* Fiber.join(a)

      const idsB = Option.getOrThrow(answered).map((r) => r.effectId)
      assert.deepStrictEqual([...heldByA.ids, ...idsB].sort(), ["job:j1", "job:j2", "job:j3", "job:j4", "job:j5"])
      const rows = yield* Effect.provide(Outbox.list({ status: "running" }), storeA)
      assert.deepStrictEqual(
        rows.map((r) => [r.effectId, r.attempts, r.leaseOwner]).sort(),
        [...heldByA.ids.map((id) => [id, 1, "owner-A"]), ...idsB.map((id) => [id, 1, "owner-B"])].sort()
      )
    })
  )

  it.scopedLive("two nodes' reactors on one schema perform every row exactly once", () =>
    Effect.gen(function* () {
      const file = tempDbFile()
      const handlers = [scriptedHandler(), scriptedHandler()]
      const node = (nodeId: string, handler: ReturnType<typeof scriptedHandler>) =>
        Boot.layer({
          reactors: [testReactor(handler.handle, { concurrency: 4 })],
          retention: false,
          worker: { nodeId }
        }).pipe(Layer.provideMerge(Engine.layer(jobsConfig)), Layer.provideMerge(TestStore.layer({ filename: file })))
      const engineA = yield* Effect.provide(Engine.Engine, yield* Layer.build(node("node-A", handlers[0]!)))
      const engineB = yield* Effect.provide(Engine.Engine, yield* Layer.build(node("node-B", handlers[1]!)))
      const ids = Array.from({ length: 30 }, (_, i) => `j${i}`)
      yield* Effect.forEach(
        ids,
        (id, i) => (i % 2 === 0 ? engineA : engineB).dispatchWithReceipt(submit(id, "work.safe")),
        { concurrency: 4 }
      )
      const store = yield* Layer.build(TestStore.layer({ filename: file }))
      yield* eventually(
        Effect.map(
          Effect.provide(Outbox.list({ status: "succeeded", limit: 100 }), store),
          (rows) => rows.length === ids.length
        ),
        "all performed"
      )
      const performed = [...handlers[0]!.performed, ...handlers[1]!.performed].sort()
      assert.deepStrictEqual(performed, ids.map((id) => `job:${id}#1`).sort())
    })
  )
})

describe("boot on a shared store", () => {
  it.scopedLive("a node that boots leaves a live peer's running rows to the peer", () =>
    Effect.gen(function* () {
      const file = tempDbFile()
      const handler = scriptedHandler()
      const running = gated("done")
      handler.behaviors.set("job:j1", running.behavior)
      const node = (nodeId: string) =>
        Boot.layer({ reactors: [testReactor(handler.handle)], retention: false, worker: { nodeId } }).pipe(
          Layer.provideMerge(Engine.layer(jobsConfig)),
          Layer.provideMerge(TestStore.layer({ filename: file }))
        )
      const peer = yield* Effect.provide(Engine.Engine, yield* Layer.build(node("node-B")))
      yield* peer.dispatchWithReceipt(submit("j1", "work.safe"))
      const store = yield* Layer.build(TestStore.layer({ filename: file }))
      const row = () => Effect.provide(Outbox.find("job:j1"), store)
      yield* eventually(
        Effect.map(row(), (r) => r?.status === "running"),
        "the peer runs j1"
      )
      const before = (yield* row())!

      // node-A boots (its first incarnation) while node-B performs j1.
      const booted = yield* Effect.flatMap(Layer.build(node("node-A")), (context) =>
        Effect.provide(Boot.BootReport, context)
      )
      assert.deepStrictEqual(booted.reconciled, { requeued: 0, failed: 0, alreadySettled: 0, quarantined: 0 })
      const after = (yield* row())!
      assert.deepStrictEqual([after.status, after.attempts, after.leaseOwner], ["running", 1, before.leaseOwner])

      // The peer finishes and its outcome lands: it never lost the row.
      yield* running.open
      yield* eventually(
        Effect.map(row(), (r) => r?.status === "succeeded"),
        "the peer settles j1"
      )
      assert.deepStrictEqual(handler.performed, ["job:j1#1"])
    })
  )
})
