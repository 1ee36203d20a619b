/**
 * A row made claimable outside the front door (an operator failing a parked row, a performer handing its
 * row back at shutdown) is a row update, not a commit: no commit's NOTIFY tells the other nodes. The write
 * notifies them itself, so another node's reactor takes the freed row within seconds, not at its poll
 * (an hour here; the bound is wide for a loaded CI machine).
 */
import { assert, describe, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Exit, Layer, Scope } from "effect"
import { Boot, Engine } from "../../src/index.js"
import * as Outbox from "../../src/Outbox.js"
import * as Quarantine from "../../src/Quarantine.js"
import * as TestStore from "../../src/testing/TestStore.js"
import { jobsConfig, submit } from "../fixtures/Jobs.js"
import { tempDbFile } from "../fixtures/harness.js"
import { eventually, scriptedHandler, testReactor } from "../fixtures/reactors.js"
import { wait } from "./sessions.js"

const safeOnly = (handle: Parameters<typeof testReactor>[0], overrides: Parameters<typeof testReactor>[1] = {}) =>
  testReactor(handle, {
    kinds: { "work.safe": { onProcessLoss: "replay-safe", timeout: "1 minute" } },
    pollInterval: "1 hour",
    ...overrides
  })

const node = (file: string, nodeId: string, reactors: ReadonlyArray<ReturnType<typeof testReactor>>) =>
  Boot.layer({ reactors, retention: false, worker: { nodeId } }).pipe(
    Layer.provideMerge(Engine.layer(jobsConfig)),
    Layer.provideMerge(TestStore.layer({ filename: file }))
  )

/** Waits in real time (PostgreSQL answers asynchronously) until `condition`, for at most `ms`. */
const within = <E, R>(ms: number, condition: Effect.Effect<boolean, E, R>, what: string) =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    while (Date.now() < deadline) {
      if (yield* condition) return
      yield* wait(20)
    }
    assert.fail(`not within ${ms} ms: ${what}`)
  })

const succeeded = (effectId: string) => Effect.map(Outbox.find(effectId), (row) => row?.status === "succeeded")

describe("a row freed outside the front door, across nodes", () => {
  for (const operator of ["a node's engine", "the store alone (the CLI's direct mode)"] as const)
    it.scopedLive(`an operator's fail of a parked row through ${operator} frees its lane on the other node`, () =>
      Effect.gen(function* () {
        const file = tempDbFile()
        const performer = scriptedHandler()
        const nodeA = yield* Layer.build(node(file, "node-A", [safeOnly(performer.handle)]))
        const operatorContext = yield* Layer.build(
          operator === "a node's engine" ? node(file, "node-B", []) : TestStore.layer({ filename: file })
        )
        // given a parked row at the head of a lane and a row behind it, which node A's reactor cannot take
        const engineA = yield* Effect.provide(Engine.Engine, nodeA)
        yield* engineA.dispatchWithReceipt(submit("parked", "work.bound", { lane: "shared" }))
        yield* Effect.provide(
          Effect.flatMap(
            SqlClient,
            (sql) => sql`UPDATE outbox SET status = 'quarantined' WHERE effect_id = 'job:parked'`
          ),
          nodeA
        )
        yield* engineA.dispatchWithReceipt(submit("next", "work.safe", { lane: "shared" }))
        yield* wait(200)
        assert.deepStrictEqual(performer.performed, [])
        // when the operator fails the parked row elsewhere
        yield* Effect.provide(Quarantine.fail("job:parked", "settled by hand"), operatorContext)
        // then node A performs the next row of the lane at once, not at its hourly poll
        yield* Effect.provide(within(5_000, succeeded("job:next"), "node A performed the freed lane's next row"), nodeA)
        assert.deepStrictEqual(performer.performed, ["job:next#1"])
      })
    )

  it.scopedLive("a row node A hands back at its shutdown is taken by node B at once, not at its poll", () =>
    Effect.gen(function* () {
      const file = tempDbFile()
      const first = scriptedHandler()
      first.behaviors.set("job:j1", () => Effect.never)
      const second = scriptedHandler()
      yield* Layer.build(node(file, "node-B", [safeOnly(second.handle, { name: "test-reactor" })]))
      const store = yield* Layer.build(TestStore.layer({ filename: file }))
      // given node A running j1 (a replay-safe row) while node B idles on an hourly poll
      const scopeA = yield* Scope.make()
      const nodeA = yield* Layer.buildWithScope(
        node(file, "node-A", [safeOnly(first.handle, { shutdownGrace: "0 millis" })]),
        scopeA
      )
      yield* Effect.flatMap(Effect.provide(Engine.Engine, nodeA), (engine) =>
        engine.dispatchWithReceipt(submit("j1", "work.safe"))
      )
      yield* Effect.provide(
        eventually(
          Effect.map(Outbox.find("job:j1"), (row) => row?.status === "running" && row.leaseOwner !== null),
          "node A runs j1"
        ),
        store
      )
      yield* wait(200)
      assert.deepStrictEqual(second.performed, [])
      // when node A shuts down and hands j1 back to pending
      yield* Scope.close(scopeA, Exit.void)
      // then node B performs it at once, not at its hourly poll
      yield* Effect.provide(within(5_000, succeeded("job:j1"), "node B performed the handed-back row"), store)
      assert.deepStrictEqual(second.performed, ["job:j1#2"])
    })
  )
})
