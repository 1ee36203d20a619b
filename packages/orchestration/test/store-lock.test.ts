import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { fileURLToPath } from "node:url"
import { Engine, StoreLocked } from "../src/index.js"
import { kill, runChild, startChild } from "./fixtures/child.js"
import { engineLayer, tempDbFile } from "./fixtures/harness.js"

const holdStore = fileURLToPath(new URL("../dist/test/fixtures/hold-store.js", import.meta.url))

describe("one engine per SQLite file", () => {
  it.live("a second engine process on the same file refuses to start; the lock dies with a killed holder", () => {
    const file = tempDbFile()
    return Effect.gen(function* () {
      const holder = yield* startChild(holdStore, [file])
      const second = yield* runChild(holdStore, [file])
      assert.strictEqual(second.code, 3)
      assert.include(second.stderr, "StoreLocked")
      assert.include(second.stderr, "one engine writes a SQLite store at a time")
      // The same refusal in this process, as a typed error.
      const refused = yield* Effect.flip(Effect.provide(Engine.Engine, engineLayer({ filename: file })))
      assert.instanceOf(refused, StoreLocked)
      // SIGKILL leaves no stale lock: the kernel releases it with the process.
      yield* kill(holder)
      const sequence = yield* Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const answer = yield* engine.dispatchWithReceipt({
          commandId: "after",
          type: "account.open",
          accountId: "acc-after",
          owner: "me"
        })
        return answer.sequence
      }).pipe(Effect.provide(engineLayer({ filename: file })))
      assert.strictEqual(sequence, 2)
    })
  })
})
