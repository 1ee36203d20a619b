/**
 * `orchestrator timers list` against a real server process, and its table for a failed timer: the
 * reason and message an operator reads without the server's log.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { renderTimers } from "../src/commands/Timers.js"
import { cli, send, serverLayer, TestServer } from "./fixtures/processes.js"

const failedTimer = {
  aggregateType: "thread",
  aggregateId: "t1",
  timerId: "wait.approval:call_1",
  generation: 2,
  dueAt: 0,
  command: null,
  undecodable: "its stored command is not JSON (cut off)",
  status: "failed" as const,
  attempts: 0,
  updatedAt: 1_000,
  failure: { reason: "unreadable" as const, message: `its stored command is not JSON (cut off) ${"x".repeat(500)}` }
}

describe("a failed timer as its reader gets it", () => {
  it("the table names the timer, its generation, reason and message, cut to a line", () => {
    const text = renderTimers({ timers: [failedTimer] })
    const [header, row] = text.split("\n")
    assert.match(header!, /^AGGREGATE\s+TIMER\s+GEN\s+STATUS\s+DUE\s+UPDATED\s+REASON\s+MESSAGE$/)
    assert.match(
      row!,
      /^thread\/t1\s+wait\.approval:call_1\s+2\s+failed\s+1970-01-01T00:00:00\.000Z\s+1970-01-01T00:00:01\.000Z\s+unreadable\s+its stored command is not JSON \(cut off\) x+…$/
    )
    assert.isBelow(row!.length, 300)
    assert.strictEqual(renderTimers({ timers: [] }), "no timers")
  })
})

layer(serverLayer(), { excludeTestServices: true })((it) => {
  describe("orchestrator timers", () => {
    it.effect("list shows the failed timers by default, and another status when named", () =>
      Effect.gen(function* () {
        const { url } = yield* TestServer
        // A trigger schedules its next tick as a durable timer, pending until then.
        const put = yield* send(url, {
          commandId: "put-daily",
          type: "trigger.put",
          triggerId: "daily",
          cron: "0 9 * * *",
          timezone: "UTC",
          threadId: "t-daily",
          text: "good morning"
        })
        assert.strictEqual(put.status, 200)
        const failed = yield* cli(["timers", "list", "--url", url])
        assert.strictEqual(failed.code, 0, failed.stderr)
        assert.strictEqual(failed.stdout.trim(), "no timers")
        const json = yield* cli(["timers", "list", "--status", "pending", "--limit", "5", "--url", url, "--json"])
        assert.strictEqual(json.code, 0, json.stderr)
        const body = JSON.parse(json.stdout) as { timers: Array<Record<string, unknown>> }
        assert.deepStrictEqual(
          body.timers.map((t) => [t.aggregateType, t.aggregateId, t.status, t.failure]),
          [["trigger", "daily", "pending", null]]
        )
        const table = yield* cli(["timers", "list", "--status", "pending", "--url", url])
        assert.strictEqual(table.code, 0, table.stderr)
        assert.match(table.stdout, /trigger\/daily\s+\S+\s+1\s+pending/)
        const bad = yield* cli(["timers", "list", "--limit", "0", "--url", url])
        assert.notStrictEqual(bad.code, 0)
        assert.include(bad.stderr, "limit")
      })
    )
  })
})
