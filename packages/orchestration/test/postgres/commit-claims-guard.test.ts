/**
 * Claims at commit on PostgreSQL (CommitClaims.ts, Outbox.ClaimRequest.inWritingTransaction): a batch
 * claims in its own transaction only while no other writer of the schema runs, because a row of the
 * same lane with a lower sequence may sit in one, invisible to the claim's lane check. Another session
 * holds a writer's transaction open (as another process's batch does: its xid and the schema's
 * writers' lock first); the batch's own transaction, read at its `dispatch.before-commit`, must then
 * hold the row unclaimed.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import pg from "pg"
import { Engine } from "../../src/index.js"
import * as Outbox from "../../src/Outbox.js"
import * as CommitHorizon from "../../src/storage/CommitHorizon.js"
import * as TestStore from "../../src/testing/TestStore.js"
import { probe } from "../fixtures/commitProbe.js"
import { submit } from "../fixtures/Jobs.js"
import { eventually, scriptedHandler, stack, testReactor } from "../fixtures/reactors.js"

/** Another session on the test's schema (closed with the scope), and the schema's writers' lock name. */
const otherSession = Effect.gen(function* () {
  const sql = yield* SqlClient
  const [{ schema }] = (yield* sql<{ schema: string }>`SELECT current_schema() AS schema`) as [{ schema: string }]
  const other = new pg.Client({ connectionString: TestStore.testDatabaseUrl() })
  yield* Effect.promise(() => other.connect())
  yield* Effect.addFinalizer(() => Effect.promise(() => other.end()))
  return { other, writers: CommitHorizon.writersName(schema) }
})

describe("claims at commit on PostgreSQL", () => {
  it.effect("while another writer runs a commit claims nothing; the reactor claims the row once it ends", () => {
    const handler = scriptedHandler()
    const seen = probe()
    return Effect.gen(function* () {
      seen.state.sql = yield* SqlClient
      const engine = yield* Engine.Engine
      const { other, writers } = yield* otherSession
      yield* Effect.promise(() => other.query("BEGIN"))
      yield* Effect.promise(() => other.query(CommitHorizon.WRITER_XID_FIRST, [writers]))
      seen.state.watched = ["job:held"]
      yield* engine.dispatchWithReceipt(submit("held", "work.safe"))
      assert.deepStrictEqual(seen.state.seen, [
        { effectId: "job:held", status: "pending", attempts: 0, leaseOwner: null }
      ])
      seen.state.watched = []
      yield* Effect.promise(() => other.query("COMMIT"))
      yield* eventually(
        Effect.map(Outbox.find("job:held"), (row) => row?.status === "succeeded"),
        "the reactor claims and performs it"
      )
      assert.deepStrictEqual(handler.performed, ["job:held#1"])
    }).pipe(Effect.scoped, Effect.provide(stack([testReactor(handler.handle)]).pipe(Layer.provide(seen.layer))))
  })

  it.effect("a batch that claimed at commit keeps other writers out until its COMMIT", () => {
    const handler = scriptedHandler()
    const seen = probe()
    return Effect.gen(function* () {
      seen.state.sql = yield* SqlClient
      const engine = yield* Engine.Engine
      const { other, writers } = yield* otherSession
      yield* Effect.promise(() => other.query("SET lock_timeout = '200ms'"))
      // Inside the batch, after its claim: another writer starting now must wait for this COMMIT (a
      // writer that could commit a lower row of a lane the claim passed over; see CommitHorizon.WRITERS_ALONE).
      // A batch claims only while the reactor has free slots: not before its loop has seen the
      // activation, nor while its own step holds them for a claim in flight. Under load (CI) the first
      // dispatch can come before either, so the property is checked on the first batch that claimed.
      let whileOpen = "not tried"
      let claimedIn: string | undefined
      for (let i = 1; i <= 20 && claimedIn === undefined; i++) {
        const effectId = `job:first-${i}`
        seen.state.watched = [effectId]
        seen.state.seen = []
        whileOpen = "not tried"
        seen.state.also = Effect.promise(async () => {
          await other.query("BEGIN")
          whileOpen = await other.query(CommitHorizon.WRITER_XID_FIRST, [writers]).then(
            () => "started",
            (error: { code?: string }) => `refused ${error.code}`
          )
          await other.query("ROLLBACK")
        })
        yield* engine.dispatchWithReceipt(submit(`first-${i}`, "work.safe"))
        const [row] = seen.state.seen
        if (row?.status === "running") {
          claimedIn = effectId
          assert.deepStrictEqual(seen.state.seen, [{ effectId, status: "running", attempts: 1, leaseOwner: "owner-A" }])
          assert.strictEqual(whileOpen, "refused 55P03")
        } else {
          // Not claimed in its commit (the reactor had no free slot yet; the batch may still have held
          // the writers' lock for its attempt): the reactor performs it on its own.
          assert.deepStrictEqual(seen.state.seen, [{ effectId, status: "pending", attempts: 0, leaseOwner: null }])
          seen.state.watched = []
          yield* eventually(
            Effect.map(Outbox.find(effectId), (found) => found?.status === "succeeded"),
            `${effectId} performed`
          )
        }
      }
      assert.isDefined(claimedIn, "no batch claimed at commit in 20 tries")
      // After the COMMIT the writer starts at once.
      yield* Effect.promise(() => other.query("BEGIN"))
      yield* Effect.promise(() => other.query(CommitHorizon.WRITER_XID_FIRST, [writers]))
      yield* Effect.promise(() => other.query("COMMIT"))
      seen.state.watched = []
      yield* eventually(
        Effect.map(Outbox.find(claimedIn!), (row) => row?.status === "succeeded"),
        "performed"
      )
    }).pipe(Effect.scoped, Effect.provide(stack([testReactor(handler.handle)]).pipe(Layer.provide(seen.layer))))
  })
})
