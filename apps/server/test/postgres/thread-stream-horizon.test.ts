/**
 * A thread's reader on PostgreSQL is not held back by another aggregate's open transaction. A read
 * of the log, or of an aggregate id alone, stops at the commit horizon, which a long-open writer of
 * the schema holds back (a boot reconcile's batch of 2,048 commands, another node's batch). One
 * aggregate's events commit in order (their versions are unique), so the thread's own reads need no
 * horizon: the reader asks for the thread's aggregate type with its id.
 */
import { assert, describe, it } from "@effect/vitest"
import { Engine, FaultPoints } from "@orchestration/engine"
import { Account } from "@orchestration/engine/examples"
import { TestStore } from "@orchestration/engine/testing"
import { SqlClient } from "@effect/sql/SqlClient"
import { Deferred, Effect, Fiber, Layer, Stream } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as ThreadStream from "../../src/ThreadStream.js"
import { openAccount } from "../fixtures/AccountsDomain.js"

/** The test's "thread": an account, whose events the reader sends as they are. */
const rules: ThreadStream.ThreadStreamRules = {
  aggregateType: "account",
  transition: () => undefined,
  stepEffectId: () => "none"
}

/** An engine on the schema of `filename`; its next dispatch transaction, once armed, waits before COMMIT until released. */
const engineOn = (filename: string) =>
  Effect.gen(function* () {
    const store = yield* Layer.build(TestStore.layer({ filename }))
    const state = { armed: false }
    const holding = yield* Deferred.make<void>()
    const release = yield* Deferred.make<void>()
    const faults = Layer.succeed(FaultPoints.FaultPoints, {
      enabled: true,
      hit: (point) =>
        point === "dispatch.before-commit" && state.armed
          ? Effect.gen(function* () {
              state.armed = false
              yield* Deferred.succeed(holding, undefined)
              yield* Deferred.await(release)
            })
          : Effect.void
    })
    const engine = yield* Effect.provide(
      Engine.Engine,
      yield* Layer.build(
        Engine.layer({ aggregates: [Account], activation: "on-start" }).pipe(
          Layer.provide(faults),
          Layer.provide(Layer.succeedContext(store))
        )
      )
    )
    const sql = yield* Effect.provide(SqlClient, store)
    return {
      engine,
      sql,
      arm: Effect.sync(() => (state.armed = true)),
      held: Deferred.await(holding),
      release: Deferred.succeed(release, undefined)
    }
  })

describe("a thread's reader on PostgreSQL", () => {
  it.scopedLive("sees its thread's new event while another aggregate's transaction stays open", () =>
    Effect.gen(function* () {
      const filename = join(mkdtempSync(join(tmpdir(), "thread-horizon-")), "engine.db")
      const writer = yield* engineOn(filename)
      const other = yield* engineOn(filename)
      yield* writer.engine.dispatchWithReceipt(openAccount("open-t1", "t1"))
      const seen: Array<ThreadStream.StreamMessage> = []
      const reader = yield* ThreadStream.follow({
        engine: writer.engine,
        sql: writer.sql,
        rules,
        threadId: "t1",
        from: ThreadStream.start
      }).pipe(
        Stream.runForEach((message) => Effect.sync(() => seen.push(message))),
        Effect.fork
      )
      const events = () => seen.filter((m) => m.kind === "thread-event").length
      const until = (what: string, n: number) =>
        Effect.gen(function* () {
          const deadline = Date.now() + 15_000
          while (Date.now() < deadline && events() < n) yield* Effect.sleep("20 millis")
          assert.strictEqual(events(), n, what)
        })
      yield* until("the thread's first event", 1)
      // Another node's batch on another aggregate: open, a writer of the schema, not committing.
      // Released whatever happens: a held batch would keep the engine's shutdown waiting at the test's end.
      yield* Effect.addFinalizer(() => other.release)
      yield* other.arm
      const held = yield* Effect.fork(other.engine.dispatchWithReceipt(openAccount("open-x", "x")))
      yield* other.held
      yield* writer.engine.dispatchWithReceipt({
        commandId: "dep-t1",
        type: "account.deposit",
        accountId: "t1",
        amount: 5
      })
      // The reader's wait is bounded by the time, not by the other transaction: it is still open here.
      yield* until("the thread's event committed while another aggregate's transaction is open", 2)
      yield* other.release
      yield* Fiber.join(held)
      yield* Fiber.interrupt(reader)
    })
  )
})
