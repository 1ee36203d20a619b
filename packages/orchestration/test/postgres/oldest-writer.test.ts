/**
 * The health signal for a long-open writer: on a shared store a dispatch left open holds every
 * reader's commit horizon back, so the store says how long its oldest running writer has been open.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { StoreBackend } from "../../src/storage/StoreBackend.js"
import { submit } from "../fixtures/Jobs.js"
import { engineHeldAt, wait } from "./sessions.js"

describe("the oldest open writer", () => {
  it.scopedLive("a dispatch held open is the store's oldest writer until it commits", () =>
    Effect.gen(function* () {
      const { hold, engine, inStore } = yield* engineHeldAt("dispatch.before-commit")
      const oldest = inStore(Effect.flatMap(StoreBackend, (backend) => backend.oldestWriterMs))
      assert.isUndefined(yield* oldest)
      yield* hold.arm
      const dispatch = yield* Effect.fork(engine.dispatchWithReceipt(submit("j1", "work.safe")))
      yield* hold.held
      yield* wait(200)
      const open = yield* oldest
      assert.isDefined(open)
      assert.isAtLeast(open!, 150)
      yield* hold.release
      yield* Fiber.join(dispatch)
      assert.isUndefined(yield* oldest)
    })
  )
})
