/**
 * Triggers under a real SIGKILL: real processes on one SQLite file, sharing a timeline shifted so a
 * minute's tick is seconds ahead (trigger-child.ts), not up to a real minute. A tick due while the process is down
 * fires once after boot; a kill between the tick's commit and its message still sends it once.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { fileURLToPath } from "node:url"
import { tempDir } from "./fixtures/agents.js"
import { jsonLines, runChild } from "./fixtures/child.js"

const child = fileURLToPath(new URL("../dist/test/fixtures/trigger-child.js", import.meta.url))

const nineAt = Date.parse("2026-06-01T09:00:00Z")
const nine = "trigger:t:2026-06-01T09:00:00.000Z"

/**
 * A timeline where now is 8 s before 09:00:00Z: the put child (a few seconds to start) puts
 * `* * * * *` before 09:00, so its first tick is 09:00, due while the process is down.
 */
const timeline = () => {
  const offset = nineAt - 8_000 - Date.now()
  return {
    env: { VIRTUAL_OFFSET_MS: String(offset) },
    /** Waits (real time) until the timeline is past 09:00. */
    pastNine: Effect.suspend(() => Effect.sleep(Math.max(0, nineAt + 300 - (Date.now() + offset))))
  }
}

describe("trigger crash test: real processes killed with SIGKILL", () => {
  it.live("killed right after the put; the tick comes due while down: it fires once after boot", () =>
    Effect.gen(function* () {
      const dir = tempDir("trigger-crash-")
      const { env, pastNine } = timeline()
      const killed = yield* runChild(child, [dir, "put", "* * * * *"], {
        ...env,
        FAULT_POINTS: "dispatch.after-commit:nth=1"
      })
      assert.strictEqual(killed.signal, "SIGKILL", killed.stderr)
      // Down past 09:00:00 on the shared timeline.
      yield* pastNine
      const first = yield* runChild(child, [dir, "serve"], env)
      assert.strictEqual(first.code, 0, first.stderr)
      assert.deepStrictEqual(jsonLines(first.stdout).at(-1), { sends: [nine], fired: 1, timer: "pending" })
      // Another boot sends nothing again (the 09:01 tick is not due yet on the timeline).
      const second = yield* runChild(child, [dir, "serve"], env)
      assert.strictEqual(second.code, 0, second.stderr)
      assert.deepStrictEqual(jsonLines(second.stdout).at(-1), { sends: [nine], fired: 1, timer: "pending" })
    })
  )

  it.live("killed after the tick committed, before its message was sent: the restart sends it once", () =>
    Effect.gen(function* () {
      const dir = tempDir("trigger-crash-")
      const { env, pastNine } = timeline()
      const put = yield* runChild(child, [dir, "put", "* * * * *"], {
        ...env,
        FAULT_POINTS: "dispatch.after-commit:nth=1"
      })
      assert.strictEqual(put.signal, "SIGKILL", put.stderr)
      yield* pastNine
      // The tick is this process's first commit: it dies with trigger.fired and the effect row written.
      const killed = yield* runChild(child, [dir, "serve"], { ...env, FAULT_POINTS: "dispatch.after-commit:nth=1" })
      assert.strictEqual(killed.signal, "SIGKILL", killed.stderr)
      const restarted = yield* runChild(child, [dir, "serve"], env)
      assert.strictEqual(restarted.code, 0, restarted.stderr)
      assert.deepStrictEqual(jsonLines(restarted.stdout).at(-1), { sends: [nine], fired: 1, timer: "pending" })
    })
  )
})
