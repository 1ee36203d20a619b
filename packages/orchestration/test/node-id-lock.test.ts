/**
 * The node-id lock's hold loop (PgSessions.holdWith), driven without a database: the lock guards
 * single ownership of a node id, so when its session is lost it is taken again, and a process that
 * finds it taken by another must stop. A re-take that dies (a bug) must not end the loop silently:
 * the node would then run on without its lock, and nobody would learn that another took its id.
 */
import { SqlError } from "@effect/sql/SqlError"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Logger, Option, TestClock } from "effect"
import type { NodeIdInUse } from "../src/Errors.js"
import * as PgSessions from "../src/storage/PgSessions.js"

/** A lock held until `lose` ends its session. */
const heldLock = () => {
  const lost = Deferred.unsafeMake<void>(undefined as never)
  const held: PgSessions.HeldLock = { lost: Deferred.await(lost), close: Effect.void }
  return { held, lose: Deferred.succeed(lost, undefined) }
}

describe("the node-id lock's hold loop", () => {
  it.scoped(
    "a re-take that dies is logged and tried again with a backoff, a refused one every 500 ms; the lock is held again, and taken by another the node is told",
    () => {
      const logged: Array<string> = []
      const kept = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ logLevel, message }) => {
          const text = (Array.isArray(message) ? message : [message]).map(String).join(" ")
          logged.push(`${logLevel.label} ${text.slice(0, 40)}`)
        })
      )
      return Effect.gen(function* () {
        const first = heldLock()
        const second = heldLock()
        // The answers of successive takes: held; then, after the loss, two deaths, a refusal, held;
        // then, after the second loss, taken by another.
        const answers: Array<Effect.Effect<PgSessions.HeldLock | undefined, SqlError>> = [
          Effect.succeed(first.held),
          Effect.dieMessage("driver bug in pg_try_advisory_lock"),
          Effect.dieMessage("driver bug in pg_try_advisory_lock"),
          Effect.fail(new SqlError({ cause: new Error("ECONNREFUSED"), message: "unreachable" })),
          Effect.succeed(second.held),
          Effect.sync(() => undefined) // not held: another process has the lock
        ]
        let takes = 0
        const take = Effect.suspend(() => answers[takes++]!)
        const told = yield* Deferred.make<NodeIdInUse>()
        yield* PgSessions.holdWith(take, "n1", (error) => Deferred.succeed(told, error))
        assert.strictEqual(takes, 1)
        // when the session is lost and the re-take dies
        yield* first.lose
        yield* TestClock.adjust("0 millis")
        assert.strictEqual(takes, 2)
        // then it is tried again after 500 ms, and after a second death 1 s later (the backoff)
        yield* TestClock.adjust("500 millis")
        assert.strictEqual(takes, 3, "the re-take was tried again after it died")
        yield* TestClock.adjust("999 millis")
        assert.strictEqual(takes, 3)
        yield* TestClock.adjust("1 millis")
        assert.strictEqual(takes, 4)
        // a refusal (database unreachable) is retried after 500 ms as before, and the lock is held again
        yield* TestClock.adjust("500 millis")
        assert.strictEqual(takes, 5)
        assert.isTrue(Option.isNone(yield* Deferred.poll(told)))
        // and when that session is lost too and another process took the id meanwhile, the node is told
        yield* second.lose
        yield* TestClock.adjust("0 millis")
        assert.strictEqual(takes, 6)
        const error = yield* Deferred.await(told)
        assert.strictEqual(error.nodeId, "n1")
        assert.deepStrictEqual(
          logged.map((line) => line.split(" ")[0]),
          ["ERROR", "ERROR", "ERROR", "WARN", "WARN", "ERROR"],
          logged.join("\n")
        )
      }).pipe(Effect.provide(kept))
    }
  )
})
