/**
 * A storage outage longer than the lease, then recovery. A heartbeat or renewal the store refused
 * says nothing about its writer: no process reclaims its own rows, a peer is judged dead only by a
 * process that watched the store take writes for the whole dead-after span, and an owner whose
 * renewal failed re-checks its lease before it settles.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, TestClock } from "effect"
import { Engine } from "../src/index.js"
import * as Outbox from "../src/Outbox.js"
import * as Owners from "../src/Owners.js"
import { jobStatus, submit } from "./fixtures/Jobs.js"
import { eventually, gated, refuseWrites, scriptedHandler, settle, stack, testReactor } from "./fixtures/reactors.js"

const rowIs = (effectId: string, predicate: (row: Outbox.OutboxRow) => boolean) =>
  Effect.map(Outbox.find(effectId), (row) => row !== undefined && predicate(row))

const seconds = (n: number, each: Effect.Effect<void, unknown, SqlClient> = Effect.void) =>
  Effect.gen(function* () {
    for (let i = 0; i < n; i++) {
      yield* TestClock.adjust("1 second")
      yield* settle
      yield* each
    }
  })

const bound = (job: string) => ({ job, kind: "work.bound" })

describe("a storage outage longer than the lease", () => {
  it.effect(
    "the process keeps its own running effect through the outage and records the handler's real outcome after it",
    () => {
      const handler = scriptedHandler()
      const running = gated("the real outcome")
      handler.behaviors.set("job:bound", running.behavior)
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(submit("bound", "work.bound"))
        yield* eventually(
          rowIs("job:bound", (r) => r.status === "running"),
          "claimed"
        )
        yield* refuseWrites(true)
        // 16 s without writes: the 3 s lease and the 10 s dead-after pass; renewals and heartbeats fail.
        yield* seconds(16)
        yield* refuseWrites(false)
        // Writes are back. A commit rings the doorbell and the reactor polls every second, all before
        // this process's next heartbeat (every 5 s) lands.
        yield* engine.dispatchWithReceipt(submit("doorbell", "work.safe"))
        yield* seconds(3)
        yield* eventually(
          rowIs("job:doorbell", (r) => r.status === "succeeded"),
          "doorbell job performed"
        )
        const row = (yield* Outbox.find("job:bound"))!
        assert.deepStrictEqual([row.status, row.leaseOwner, row.attempts, row.error], ["running", "owner-A", 1, null])
        // The renewal, retried through the outage, holds the lease again.
        assert.isAbove(row.leaseExpiresAt!, yield* Clock.currentTimeMillis)
        yield* running.open
        yield* eventually(
          rowIs("job:bound", (r) => r.status === "succeeded"),
          "settled with its real outcome"
        )
        assert.strictEqual((yield* Outbox.find("job:bound"))!.response, "the real outcome")
        assert.deepStrictEqual(yield* jobStatus("job:bound"), {
          status: "succeeded",
          detail: JSON.stringify("the real outcome")
        })
        assert.deepStrictEqual(handler.performed, ["job:bound#1", "job:doorbell#1"])
      }).pipe(
        Effect.ensuring(running.open),
        Effect.provide(
          stack([testReactor(handler.handle, { lease: "3 seconds" })], { worker: { heartbeatEvery: "5 seconds" } })
        )
      )
    }
  )

  it.effect(
    "after a store-wide outage a peer keeps its rows until it could beat again; a peer that stays silent is reclaimed once this process watched the store for the dead-after span",
    () => {
      const handler = scriptedHandler()
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const sql = yield* SqlClient
        for (const { job, kind } of [bound("live"), bound("silent")])
          yield* engine.dispatchDuringBoot(submit(job, kind))
        yield* Outbox.claim({ kinds: ["work.bound"], owner: "peer-live", now: 0, leaseMs: 3_000, limit: 10, after: 0 })
        yield* sql`UPDATE outbox SET lease_owner = 'peer-silent' WHERE effect_id = 'job:silent'`
        const beat = (owner: string) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) => Owners.heartbeat(owner, `node-${owner}`, now))
        const beatBoth = Effect.zipRight(beat("peer-live"), beat("peer-silent"))
        yield* beatBoth
        yield* engine.activate
        yield* seconds(3, beatBoth)
        // The store refuses every write for 15 s, this process's and the peers' alike.
        yield* refuseWrites(true)
        yield* seconds(15)
        yield* refuseWrites(false)
        // A commit rings the doorbell; the live peer beats again every second, its first beat landing
        // a second after writes return, after this process's first checks.
        yield* engine.dispatchWithReceipt(submit("doorbell", "work.safe"))
        yield* seconds(7, beat("peer-live"))
        // 7 s after recovery: the silent peer looks dead, but this process has not yet watched the
        // store take writes for 10 s, so it does not judge.
        for (const job of ["job:live", "job:silent"]) {
          const row = (yield* Outbox.find(job))!
          assert.deepStrictEqual([job, row.status, row.error], [job, "running", null])
        }
        yield* seconds(8, beat("peer-live"))
        const live = (yield* Outbox.find("job:live"))!
        assert.deepStrictEqual([live.status, live.leaseOwner], ["running", "peer-live"])
        const silent = (yield* Outbox.find("job:silent"))!
        assert.strictEqual(silent.status, "failed")
        assert.deepStrictEqual(silent.error, {
          message: "owner stopped before the effect completed",
          code: "owner-lost",
          reason: "process-lost"
        })
        assert.deepStrictEqual(handler.performed, ["job:doorbell#1"])
      }).pipe(Effect.provide(stack([testReactor(handler.handle)], { activation: "manual" })))
    }
  )

  it.effect(
    "an owner whose renewal failed re-checks its lease before settling: a row taken over meanwhile gets no outcome from it",
    () => {
      const handler = scriptedHandler()
      const running = gated("too late")
      handler.behaviors.set("job:j1", running.behavior)
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const sql = yield* SqlClient
        yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
        yield* eventually(
          rowIs("job:j1", (r) => r.status === "running"),
          "claimed"
        )
        yield* refuseWrites(true)
        // The renewal at 1 s is refused: the lease is in doubt.
        yield* seconds(1)
        yield* refuseWrites(false)
        // Before this owner's next renewal, a peer that judged it dead re-claimed the row.
        yield* sql`UPDATE outbox SET lease_owner = 'peer', attempts = 2 WHERE effect_id = 'job:j1'`
        yield* running.open
        yield* eventually(
          Effect.sync(() => handler.running() === 0),
          "handler finished"
        )
        yield* settle
        assert.isTrue((yield* engine.receipt("outcome:job:j1#1"))._tag === "None")
        const row = (yield* Outbox.find("job:j1"))!
        assert.deepStrictEqual([row.status, row.leaseOwner, row.attempts, row.response], ["running", "peer", 2, null])
      }).pipe(
        Effect.ensuring(running.open),
        Effect.provide(stack([testReactor(handler.handle, { lease: "3 seconds" })]))
      )
    }
  )
})
