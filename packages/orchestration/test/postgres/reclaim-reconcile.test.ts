/**
 * Boot reconcile and a peer's runtime reclaim can settle the same dead row at the same attempt. Each
 * speaks under its own command id: one wins, the other finds the row settled (stale), and boot goes on.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer } from "effect"
import { Boot, Engine } from "../../src/index.js"
import * as Outbox from "../../src/Outbox.js"
import * as Owners from "../../src/Owners.js"
import * as TestStore from "../../src/testing/TestStore.js"
import { jobsConfig, submit } from "../fixtures/Jobs.js"
import { tempDbFile } from "../fixtures/harness.js"
import { scriptedHandler, testReactor } from "../fixtures/reactors.js"
import { blockedBehind, holdAt } from "./sessions.js"

describe("boot reconcile against a peer's reclaim", () => {
  it.scopedLive(
    "a row reclaimed by a peer while this node's boot reconciles it: boot finds it settled and completes",
    () =>
      Effect.gen(function* () {
        // Each node has its own pool, as separate processes do.
        const file = tempDbFile()
        const store = yield* Layer.build(TestStore.layer({ filename: file }))
        const sql = yield* Effect.provide(SqlClient, store)
        const inStore = <A, E>(effect: Effect.Effect<A, E, SqlClient>) => Effect.provide(effect, store)
        const storeLayer = Layer.succeedContext(store)
        const nodeOf = (nodeId: string, faults?: Layer.Layer<any>) =>
          Boot.layer({ reactors: [testReactor(scriptedHandler().handle)], retention: false, worker: { nodeId } }).pipe(
            Layer.provideMerge(
              faults === undefined ? Engine.layer(jobsConfig) : Engine.layer(jobsConfig).pipe(Layer.provide(faults))
            ),
            Layer.provideMerge(TestStore.layer({ filename: file }))
          )

        // node-A's previous incarnation died while running j1: lease expired, heartbeat long stopped.
        const setup = yield* Effect.provide(
          Engine.Engine,
          yield* Layer.build(Engine.layer({ ...jobsConfig, activation: "on-start" }).pipe(Layer.provide(storeLayer)))
        )
        yield* setup.dispatchWithReceipt(submit("j1", "work.safe"))
        const claimed = yield* inStore(
          Outbox.claim({ kinds: ["work.safe"], owner: "node-A:old", now: Date.now(), leaseMs: 1, limit: 1, after: 0 })
        )
        assert.strictEqual(claimed.length, 1)
        yield* inStore(Owners.heartbeat("node-A:old", "node-A", 0))

        // Peer node-B reclaims it; its settle is held open before COMMIT.
        const hold = holdAt("dispatch.before-commit", sql)
        yield* hold.arm
        yield* Layer.build(nodeOf("node-B", hold.layer))
        const holder = yield* hold.held

        // node-A restarts meanwhile: its reconcile read the row as running and waits behind the reclaim.
        const bootA = yield* Effect.fork(Layer.build(nodeOf("node-A")))
        yield* blockedBehind(sql, holder, "node-A's reconcile waits for the peer's reclaim")
        yield* hold.release

        const booted = yield* Fiber.join(bootA).pipe(
          Effect.flatMap((context) => Effect.provide(Boot.BootReport, context))
        )
        assert.deepStrictEqual(booted.reconciled, { requeued: 0, failed: 0, alreadySettled: 1, quarantined: 0 })
        const outcomes = yield* sql<{
          payload: string
        }>`SELECT payload FROM events WHERE type = 'job.outcome' ORDER BY sequence`
        assert.strictEqual(JSON.parse(outcomes[0]!.payload).by, "reclaim")
      })
  )
})
