import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import { Engine, Ingestion, Retention } from "../src/index.js"
import * as Outbox from "../src/Outbox.js"
import { jobsEngine, jobStatus, submit } from "./fixtures/Jobs.js"
import { tempDbFile } from "./fixtures/harness.js"
import { eventually, gated, scriptedHandler, settle, stack, testReactor } from "./fixtures/reactors.js"

describe("reconcileAfterProcessLoss", () => {
  it.effect("stores reasons, tells the aggregate, and completes before any claim or admitted command", () => {
    const file = tempDbFile()
    // A previous process: two effects claimed and left running when it died.
    const previous = Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.activate
      yield* engine.dispatchWithReceipt(submit("safe", "work.safe"))
      yield* engine.dispatchWithReceipt(submit("bound", "work.bound"))
      yield* Outbox.claim({ kinds: ["work.safe", "work.bound"], owner: "dead-process", now: 0, leaseMs: 30_000, limit: 10, after: 0 })
    }).pipe(Effect.provide(jobsEngine(file)))

    const handler = scriptedHandler()
    const next = Effect.gen(function* () {
      const engine = yield* Engine.Engine
      // Boot already reconciled (activation is manual); a client command queues behind the gate.
      const client = yield* Effect.fork(engine.dispatchWithReceipt(submit("client", "work.safe")))
      yield* engine.activate
      yield* Fiber.join(client)
      yield* eventually(Effect.map(Outbox.list({ status: "succeeded" }), (rows) => rows.length === 2), "safe redone, client done")
      const sql = yield* SqlClient
      const log = yield* sql<{ sequence: number; command_id: string; type: string }>`SELECT sequence, command_id, type FROM events ORDER BY sequence`
      const after = log.filter((e) => e.sequence > 2) // 1-2: the previous process's submits
      // Reconcile's two settlements come first, then the client's command, then reactor outcomes.
      assert.deepStrictEqual(after.slice(0, 3).map((e) => e.command_id), ["reconcile:job:safe#1", "reconcile:job:bound#1", "submit-client"])
      assert.isTrue(after.slice(3).every((e) => e.command_id.startsWith("outcome:")))
      assert.deepStrictEqual(yield* jobStatus("job:bound"), { status: "failed", detail: "server process ended before the effect completed" })
      const safe = (yield* Outbox.find("job:safe"))!
      assert.deepStrictEqual([safe.status, safe.attempts], ["succeeded", 2])
      // The first claim of this process was after reconcile: attempt 2 of the requeued row.
      assert.deepStrictEqual(handler.performed.sort(), ["job:client#1", "job:safe#2"])
      const requeued = yield* sql<{ payload: string }>`SELECT payload FROM events WHERE command_id = 'reconcile:job:safe#1'`
      assert.deepStrictEqual(JSON.parse(requeued[0]!.payload).error, { message: "requeued after the previous server process ended" })
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: file, activation: "manual" })))
    return Effect.zipRight(previous, next)
  })
})

describe("a settle refused by the store", () => {
  it.effect("a real SQLITE_FULL on the outcome ends with the row and the aggregate failed with the storage reason", () => {
    const handler = scriptedHandler()
    const performing = gated("x".repeat(300_000))
    handler.behaviors.set("job:j1", performing.behavior)
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const sql = yield* SqlClient
      yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
      yield* eventually(Effect.map(Outbox.find("job:j1"), (r) => r?.status === "running"), "claimed")
      const [pages] = yield* sql<{ page_count: number }>`PRAGMA page_count`
      yield* sql.unsafe(`PRAGMA max_page_count = ${Number(pages!.page_count)}`)
      // The effect answers 300 kB: recording it needs pages the store will not give.
      yield* performing.open
      for (let i = 0; i < 5; i++) {
        yield* TestClock.adjust("1 second")
        yield* settle
        // Never "succeeded" with a missing result: the row is still running, or failed with the refusal.
        assert.notStrictEqual((yield* Outbox.find("job:j1"))!.status, "succeeded")
      }
      yield* sql.unsafe("PRAGMA max_page_count = 1073741823")
      yield* TestClock.adjust("10 seconds")
      yield* eventually(Effect.map(Outbox.find("job:j1"), (r) => r?.status === "failed"), "the refusal became the outcome")
      const row = (yield* Outbox.find("job:j1"))!
      assert.deepStrictEqual(row.error, { message: "storage: SQLITE_FULL", code: "SQLITE_FULL" })
      assert.deepStrictEqual(yield* jobStatus("job:j1"), { status: "failed", detail: "storage: SQLITE_FULL" })
      // The job is terminal, never "succeeded" with a missing result, and the store takes new work.
      yield* engine.dispatchWithReceipt(submit("j2", "work.safe"))
      yield* eventually(Effect.map(Outbox.find("job:j2"), (r) => r?.status === "succeeded"), "next job")
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: tempDbFile() })))
  })
})

describe("retention", () => {
  it.effect("prunes settled rows and old receipts only, never unsettled work", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.activate
      for (const job of ["done", "running", "pending"]) yield* engine.dispatchWithReceipt(submit(job, "work.safe"))
      // "done" is performed and settled; "running" stays claimed; "pending" is never claimed.
      yield* Outbox.claim({ kinds: ["work.safe"], owner: "w", now: 0, leaseMs: 1_000, limit: 2, after: 0 })
      yield* engine.dispatchWithReceipt({
        type: "effect.succeed", commandId: "outcome:job:done#1", effectId: "job:done", attempt: 1,
        aggregateType: "job", aggregateId: "done", by: "reactor", response: "ok"
      }, { origin: "internal" })
      yield* TestClock.adjust("8 days")
      assert.deepStrictEqual(yield* Retention.pruneOnce(), { effects: 1, receipts: 0 })
      assert.isUndefined(yield* Outbox.find("job:done"))
      assert.strictEqual((yield* Outbox.find("job:running"))!.status, "running")
      assert.strictEqual((yield* Outbox.find("job:pending"))!.status, "pending")
      yield* TestClock.adjust("23 days")
      assert.deepStrictEqual(yield* Retention.pruneOnce(), { effects: 0, receipts: 4 })
      assert.strictEqual((yield* Outbox.list()).length, 2)
      // A retry older than the receipt period is treated as new: documented, and here decided again.
      const again = yield* Effect.flip(engine.dispatchWithReceipt(submit("done", "work.safe")))
      assert.strictEqual(again._tag, "CommandRejected")
    }).pipe(Effect.provide(jobsEngine())))
})

describe("ingestion ids", () => {
  it("derive from the external id; long or unsafe ids are hashed, never truncated", () => {
    assert.strictEqual(Ingestion.ingestCommandId("provider", "evt-1"), "ingest:provider:evt-1")
    const long = Ingestion.ingestCommandId("provider", "x".repeat(600))
    assert.match(long, /^ingest:provider:sha256-[0-9a-f]{64}$/)
    assert.notStrictEqual(long, Ingestion.ingestCommandId("provider", "x".repeat(601)))
    assert.match(Ingestion.ingestCommandId("provider", "a/b c"), /^ingest:provider:sha256-/)
  })
})
