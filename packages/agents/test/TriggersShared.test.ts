/**
 * Several processes on one PostgreSQL store (two full stacks on one schema, each with its own timer
 * loop and reactor, under one TestClock): each tick reaches its thread once, whichever process
 * claims the timer. Only meaningful on PostgreSQL: SQLite is held by one process.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Engine } from "@orchestration/engine"
import { TestStore } from "@orchestration/engine/testing"
import { Context, Effect, Layer, TestClock } from "effect"
import { agentsStack, eventually, tempDir } from "./fixtures/agents.js"

const onPostgres = TestStore.testStoreKind() === "postgres"

describe.skipIf(!onPostgres)("triggers on a shared PostgreSQL store", () => {
  it.scoped("two processes' timer loops race for each tick: every tick sends its message once", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2026-06-01T08:30:00Z"))
      const dir = tempDir()
      const one = yield* Layer.build(agentsStack({ dir, slowPolls: true, nodeId: "one" }))
      const two = yield* Layer.build(agentsStack({ dir, slowPolls: true, nodeId: "two" }))
      const engine = Context.get(one, Engine.Engine) as Engine.EngineShape
      yield* engine.dispatchWithReceipt({
        commandId: "put-1",
        type: "trigger.put",
        triggerId: "hourly",
        cron: "0 * * * *",
        threadId: "inbox",
        text: "tick"
      })
      const sends = Effect.gen(function* () {
        const sql = yield* SqlClient
        const rows = yield* sql<{ command_id: string }>`SELECT command_id FROM receipts
          WHERE command_type = 'message.send' AND command_id LIKE 'trigger:%' ORDER BY command_id`
        return rows.map((r) => r.command_id)
      }).pipe(Effect.provide(two))
      for (let i = 0; i < 200; i++) {
        yield* TestClock.adjust("1 minute")
        yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
      }
      yield* eventually(
        Effect.map(sends, (s) => s.length >= 3),
        "three ticks"
      ).pipe(Effect.provide(one))
      yield* eventually(Effect.succeed(true), "settle", 1).pipe(Effect.repeatN(200), Effect.provide(one))
      assert.deepStrictEqual(yield* sends, [
        "trigger:hourly:2026-06-01T09:00:00.000Z",
        "trigger:hourly:2026-06-01T10:00:00.000Z",
        "trigger:hourly:2026-06-01T11:00:00.000Z"
      ])
      // Each tick was decided once: one trigger.fired event per tick, whichever loop fired it.
      const fired = (yield* engine.readEvents()).filter((e) => e.type === "trigger.fired")
      assert.deepStrictEqual(
        fired.map((e) => (e.payload as { at: number }).at),
        [Date.parse("2026-06-01T09:00:00Z"), Date.parse("2026-06-01T10:00:00Z"), Date.parse("2026-06-01T11:00:00Z")]
      )
    })
  )
})
