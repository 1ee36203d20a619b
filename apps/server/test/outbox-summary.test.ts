import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import { domain as agents } from "../src/AgentsDomain.js"
import { client, postJson, raw, startServer, tempDataDir, waitFor } from "./fixtures/server.js"

/** A turn whose one execute fails (its log file is a directory), then answers "ok". */
const failingExecute = JSON.stringify({
  script: [{ toolCalls: [{ name: "execute", arguments: { command: "deploy" } }] }, { text: "ok" }]
})

describe("GET /v1/outbox/summary", () => {
  it.scopedLive(
    "rows by status and kind, settled count, reactor lag and the newest failure with its reason and attempts",
    () =>
      Effect.gen(function* () {
        const dataDir = tempDataDir()
        mkdirSync(join(dataDir, "world", "executions.jsonl"), { recursive: true })
        const { url } = yield* startServer({ domain: agents, dataDir })
        const empty = yield* raw(url, "/v1/outbox/summary")
        assert.strictEqual(empty.status, 200)
        assert.deepStrictEqual(empty.body.rows, [])
        assert.deepStrictEqual(empty.body.reactors, [{ name: "agents", lag: 0, oldestPendingAgeMs: 0 }])

        yield* postJson(url, "/v1/commands", {
          commandId: "m-1",
          type: "message.send",
          threadId: "t1",
          messageId: "m1",
          text: failingExecute
        })
        const summary = yield* waitFor(
          "the turn to finish",
          Effect.map(raw(url, "/v1/outbox/summary"), (r) => (r.body.settled === 3 ? r.body : undefined))
        )
        assert.deepStrictEqual(summary.rows, [
          { status: "failed", kind: "tool.execute", count: 1 },
          { status: "succeeded", kind: "model.step", count: 2 }
        ])
        assert.strictEqual(summary.oldestPendingAgeMs, 0)
        assert.isAbove(summary.head, 0)
        assert.strictEqual(summary.recentFailures.length, 1)
        const failure = summary.recentFailures[0]
        assert.strictEqual(failure.effectId, "tool:t1:m1:call_1_0")
        assert.strictEqual(failure.attempts, 1)
        assert.strictEqual(failure.error.code, "EISDIR")
        assert.include(failure.error.message, "is a directory")

        // Its turn has closed with the call answered: a process-bound execute is never performed again,
        // so the retry is refused with the reason (409, not stored) and it stays among the failures.
        const api = yield* client(url)
        const retried = yield* postJson(url, `/v1/effects/${encodeURIComponent(failure.effectId)}/retry`, {})
        assert.strictEqual(retried.status, 409, JSON.stringify(retried.body))
        assert.strictEqual(retried.body.error, "EffectActionRefused")
        assert.strictEqual(retried.body.reason, "refused-by-owner")
        const after = yield* api.outbox.summary()
        assert.isTrue(after.recentFailures.some((row) => row.effectId === failure.effectId))
      })
  )

  it.scopedLive("needs the token when API_TOKEN is set", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ domain: agents, env: { API_TOKEN: "summary-token" } })
      assert.strictEqual((yield* raw(url, "/v1/outbox/summary")).status, 401)
      const answer = yield* raw(url, "/v1/outbox/summary", { headers: { authorization: "Bearer summary-token" } })
      assert.strictEqual(answer.status, 200)
    })
  )
})
