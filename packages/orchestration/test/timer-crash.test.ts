import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { jsonLines, runChild } from "./fixtures/child.js"
import { tempDir } from "./fixtures/harness.js"

const child = fileURLToPath(new URL("../dist/test/fixtures/timer-child.js", import.meta.url))

describe("timer crash test: a real process killed with SIGKILL", () => {
  it.live("killed right after scheduling a timer due soon: after restart it fires once", () =>
    Effect.gen(function* () {
      const db = join(tempDir("timer-crash-"), "engine.db")
      const killed = yield* runChild(child, [db, "set", "1500"], { FAULT_POINTS: "dispatch.after-commit:nth=1" })
      assert.strictEqual(killed.signal, "SIGKILL")
      // Restarted (past the due time or not): the overdue timer fires once.
      const first = yield* runChild(child, [db, "serve"])
      assert.strictEqual(first.code, 0, first.stderr)
      assert.deepStrictEqual(jsonLines(first.stdout).at(-1), { fired: 1, receipts: 1, status: "fired" })
      // Another boot fires nothing again.
      const second = yield* runChild(child, [db, "serve"])
      assert.strictEqual(second.code, 0, second.stderr)
      assert.deepStrictEqual(jsonLines(second.stdout).at(-1), { fired: 1, receipts: 1, status: "fired" })
    })
  )

  it.live("killed after the fire committed, before the timer was marked fired: the second fire is a duplicate", () =>
    Effect.gen(function* () {
      const db = join(tempDir("timer-crash-"), "engine.db")
      const set = yield* runChild(child, [db, "set", "200"], { FAULT_POINTS: "dispatch.after-commit:nth=1" })
      assert.strictEqual(set.signal, "SIGKILL")
      // The fire is this process's first commit: it dies with the receipt written, the row still pending.
      const killed = yield* runChild(child, [db, "serve"], { FAULT_POINTS: "dispatch.after-commit:nth=1" })
      assert.strictEqual(killed.signal, "SIGKILL")
      const restarted = yield* runChild(child, [db, "serve"])
      assert.strictEqual(restarted.code, 0, restarted.stderr)
      assert.deepStrictEqual(jsonLines(restarted.stdout).at(-1), { fired: 1, receipts: 1, status: "fired" })
    })
  )
})
