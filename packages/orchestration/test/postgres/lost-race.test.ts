/**
 * A dispatch that loses a race to a writer NOT ordered with it (what a peer does once the append lock
 * is gone; here a raw session that skips the lock): the batch's unique violation on a receipt or an
 * aggregate version is not its answer. The batch runs again on fresh state: a duplicate finds the
 * stored answer, a version clash decides again after the winner's event.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { submit } from "../fixtures/Jobs.js"
import { blockedBehind, engineOn, otherSession } from "./sessions.js"

const cancel = (jobId: string, commandId: string) => ({ commandId, type: "job.cancel", jobId, effectIds: [] })

describe("a dispatch that loses a race to an unordered writer", () => {
  it.scopedLive("a receipt committed first under the same command id becomes the stored answer", () =>
    Effect.gen(function* () {
      // The winner's receipt, written by the same command on another store and copied in.
      const winner = yield* engineOn
      const won = yield* winner.engine.dispatchWithReceipt(submit("j1", "work.safe"))
      const loser = yield* engineOn
      const writer = yield* otherSession(
        `INSERT INTO ${loser.schema}.receipts SELECT * FROM ${winner.schema}.receipts WHERE command_id = 'submit-j1'`
      )
      const dispatch = yield* Effect.fork(Effect.exit(loser.engine.dispatchWithReceipt(submit("j1", "work.safe"))))
      yield* blockedBehind(loser.sql, writer.pid, "the dispatch's receipt waits for the open one")
      yield* writer.commit
      const answer = yield* Fiber.join(dispatch)
      assert.isTrue(Exit.isSuccess(answer), `the lost race was answered ${String(answer)}`)
      if (Exit.isSuccess(answer)) {
        assert.isTrue(answer.value.duplicate)
        assert.strictEqual(answer.value.sequence, won.sequence)
      }
      // Nothing of the losing run stayed: no events of its own.
      const events = yield* loser.sql<{ n: number }>`SELECT COUNT(*)::int AS n FROM events`.pipe(Effect.orDie)
      assert.strictEqual(Number(events[0]!.n), 0)
    })
  )

  it.scopedLive("an aggregate version committed first makes the command decide again on the winner's state", () =>
    Effect.gen(function* () {
      // The winner's event: a cancel of j1 at version 2, recorded on another store and copied in.
      const winner = yield* engineOn
      yield* winner.engine.dispatchWithReceipt(submit("j1", "work.safe"))
      yield* winner.engine.dispatchWithReceipt(cancel("j1", "cancel-by-winner"))
      const loser = yield* engineOn
      yield* loser.engine.dispatchWithReceipt(submit("j1", "work.safe"))
      const writer = yield* otherSession(
        `INSERT INTO ${loser.schema}.events (event_id, aggregate_type, aggregate_id, version, type, schema_version, payload, command_id, occurred_at)
        SELECT event_id, aggregate_type, aggregate_id, version, type, schema_version, payload, command_id, occurred_at
        FROM ${winner.schema}.events WHERE aggregate_id = 'j1' AND version = 2`
      )
      // The loser's cached state of j1 is version 1: it decides version 2 too.
      const dispatch = yield* Effect.fork(
        Effect.exit(loser.engine.dispatchWithReceipt(cancel("j1", "cancel-by-loser")))
      )
      yield* blockedBehind(loser.sql, writer.pid, "the dispatch's event waits for the open one")
      yield* writer.commit
      const answer = yield* Fiber.join(dispatch)
      assert.isTrue(Exit.isSuccess(answer), `the lost race was answered ${String(answer)}`)
      const versions = yield* loser.sql<{ version: number; command_id: string }>`
        SELECT version, command_id FROM events WHERE aggregate_id = 'j1' ORDER BY version`.pipe(Effect.orDie)
      assert.deepStrictEqual(
        versions.map((v) => [Number(v.version), v.command_id]),
        [
          [1, "submit-j1"],
          [2, "cancel-by-winner"],
          [3, "cancel-by-loser"]
        ]
      )
    })
  )
})
