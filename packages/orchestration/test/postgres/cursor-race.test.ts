/**
 * Reactor cursors against concurrent dispatches, in two sessions: an operator retry that moves a
 * cursor back must not be undone by a cursor advance that read the outbox before the retry committed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { EffectOutcomes } from "../../src/index.js"
import * as Outbox from "../../src/Outbox.js"
import * as ReactorCursors from "../../src/ReactorCursors.js"
import { submit } from "../fixtures/Jobs.js"
import { blockedBehind, engineHeldAt } from "./sessions.js"

const settlement = (type: string, commandId: string, attempt: number, extra: Record<string, unknown>) => ({
  type,
  commandId,
  effectId: "job:j1",
  attempt,
  aggregateType: "job",
  aggregateId: "j1",
  ...extra
})

describe("reactor cursors across sessions", () => {
  it.scoped("a cursor advance that started before an operator retry committed cannot strand the retried row", () =>
    Effect.gen(function* () {
      const { sql, hold, engine, inStore } = yield* engineHeldAt("dispatch.before-commit")
      const kinds = ["work.safe"]

      // j1 ran once and failed for good; the reactor's cursor then moved past it.
      yield* engine.dispatchWithReceipt(submit("j1", "work.safe"))
      const [claimed] = yield* inStore(
        Outbox.claim({ kinds, owner: "owner-A", now: 0, leaseMs: 30_000, limit: 1, after: 0 })
      )
      yield* engine.dispatchWithReceipt(
        settlement("effect.fail", EffectOutcomes.outcomeId("job:j1", 1), 1, {
          by: "reactor",
          error: { message: "no" }
        }),
        { origin: "internal" }
      )
      assert.isAtLeast(yield* inStore(ReactorCursors.advanceCursor("r", kinds, 0)), claimed!.sequence)

      // Session 1: the operator's retry, held open after it made the row pending and moved the cursor back.
      yield* hold.arm
      const retry = yield* Effect.fork(
        engine.dispatchWithReceipt(
          settlement("effect.retry", EffectOutcomes.operatorId("retry", "job:j1", 1, 0), 1, { by: "operator" }),
          { origin: "internal" }
        )
      )
      const holder = yield* hold.held
      // Session 2: the reactor advances its cursor while the retry is still open.
      const advance = yield* Effect.fork(inStore(ReactorCursors.advanceCursor("r", kinds, 0)))
      yield* blockedBehind(sql, holder, "the cursor advance waits for the open retry")
      yield* hold.release
      yield* Fiber.join(retry)
      yield* Fiber.join(advance)

      // The retried row is below no cursor: the reactor's next claim finds it.
      const cursor = yield* inStore(ReactorCursors.cursor("r"))
      assert.isBelow(cursor, claimed!.sequence, "the cursor was left above the retried row")
      const again = yield* inStore(
        Outbox.claim({ kinds, owner: "owner-A", now: 1, leaseMs: 30_000, limit: 1, after: cursor })
      )
      assert.deepStrictEqual(
        again.map((row) => [row.effectId, row.attempts]),
        [["job:j1", 2]]
      )
    })
  )
})
