import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import { Engine, Ingestion, Retention } from "../src/index.js"
import * as Outbox from "../src/Outbox.js"
import { claimByDeadProcess, jobsEngine, jobStatus, submit } from "./fixtures/Jobs.js"
import { tempDbFile } from "./fixtures/harness.js"
import { eventually, scriptedHandler, stack, testReactor } from "./fixtures/reactors.js"

describe("reconcileAfterProcessLoss", () => {
  it.effect("stores reasons, tells the aggregate, and completes before any claim or admitted command", () => {
    const file = tempDbFile()
    // A previous process: two effects claimed and left running when it died.
    const previous = Effect.gen(function* () {
      const engine = yield* Engine.Engine
      yield* engine.activate
      yield* engine.dispatchWithReceipt(submit("safe", "work.safe"))
      yield* engine.dispatchWithReceipt(submit("bound", "work.bound"))
      yield* claimByDeadProcess(10)
    }).pipe(Effect.provide(jobsEngine(file)))

    const handler = scriptedHandler()
    const next = Effect.gen(function* () {
      const engine = yield* Engine.Engine
      // Boot already reconciled (activation is manual); a client command queues behind the gate.
      const client = yield* Effect.fork(engine.dispatchWithReceipt(submit("client", "work.safe")))
      yield* engine.activate
      yield* Fiber.join(client)
      yield* eventually(
        Effect.map(Outbox.list({ status: "succeeded" }), (rows) => rows.length === 2),
        "safe redone, client done"
      )
      const sql = yield* SqlClient
      const log = yield* sql<{
        sequence: number
        command_id: string
        type: string
      }>`SELECT sequence, command_id, type FROM events ORDER BY sequence`
      const after = log.filter((e) => e.sequence > 2) // 1-2: the previous process's submits
      // Reconcile's two settlements come first, then the client's command, then reactor outcomes.
      assert.deepStrictEqual(
        after.slice(0, 3).map((e) => e.command_id),
        ["reconcile:job:safe#1", "reconcile:job:bound#1", "submit-client"]
      )
      assert.isTrue(after.slice(3).every((e) => e.command_id.startsWith("outcome:")))
      assert.deepStrictEqual(yield* jobStatus("job:bound"), {
        status: "failed",
        detail: "server process ended before the effect completed"
      })
      const safe = (yield* Outbox.find("job:safe"))!
      assert.deepStrictEqual([safe.status, safe.attempts], ["succeeded", 2])
      // The first claim of this process was after reconcile: attempt 2 of the requeued row.
      assert.deepStrictEqual(handler.performed.sort(), ["job:client#1", "job:safe#2"])
      const requeued = yield* sql<{
        payload: string
      }>`SELECT payload FROM events WHERE command_id = 'reconcile:job:safe#1'`
      assert.deepStrictEqual(JSON.parse(requeued[0]!.payload).error, {
        message: "requeued after the previous server process ended"
      })
    }).pipe(Effect.provide(stack([testReactor(handler.handle)], { filename: file, activation: "manual" })))
    return Effect.zipRight(previous, next)
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
      yield* engine.dispatchWithReceipt(
        {
          type: "effect.succeed",
          commandId: "outcome:job:done#1",
          effectId: "job:done",
          attempt: 1,
          aggregateType: "job",
          aggregateId: "done",
          by: "reactor",
          response: "ok"
        },
        { origin: "internal" }
      )
      yield* TestClock.adjust("8 days")
      assert.deepStrictEqual(yield* Retention.pruneOnce(), { effects: 1, receipts: 0, streamChunks: 0 })
      assert.isUndefined(yield* Outbox.find("job:done"))
      assert.strictEqual((yield* Outbox.find("job:running"))!.status, "running")
      assert.strictEqual((yield* Outbox.find("job:pending"))!.status, "pending")
      yield* TestClock.adjust("23 days")
      assert.deepStrictEqual(yield* Retention.pruneOnce(), { effects: 0, receipts: 4, streamChunks: 0 })
      assert.strictEqual((yield* Outbox.list()).length, 2)
      // A retry older than the receipt period is treated as new: documented, and here decided again.
      const again = yield* Effect.flip(engine.dispatchWithReceipt(submit("done", "work.safe")))
      assert.strictEqual(again._tag, "CommandRejected")
    }).pipe(Effect.provide(jobsEngine()))
  )
})

describe("ingestion ids", () => {
  it("derive from the external id; long or unsafe ids are hashed, never truncated", () => {
    assert.strictEqual(Ingestion.ingestCommandId("provider", "evt-1"), "ingest:provider:evt-1")
    const long = Ingestion.ingestCommandId("provider", "x".repeat(600))
    assert.match(long, /^ingest:provider:sha256-[0-9a-f]{64}$/)
    assert.notStrictEqual(long, Ingestion.ingestCommandId("provider", "x".repeat(601)))
    assert.match(Ingestion.ingestCommandId("provider", "a/b c"), /^ingest:provider:sha256-/)
  })

  it("two sources whose names differ only in unsafe characters never share an id", () => {
    assert.notStrictEqual(Ingestion.ingestCommandId("hook/a", "evt-1"), Ingestion.ingestCommandId("hook a", "evt-1"))
    assert.match(Ingestion.ingestCommandId("hook/a", "evt-1"), /^ingest:sha256-[0-9a-f]{64}:evt-1$/)
  })
})
