import { assert, describe, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { exact } from "./fixtures/rawHttp.js"
import { client, onStore, raw, startServer, tempDataDir, waitFor } from "./fixtures/server.js"

const token = "timers-token-0123456789"
const bearer = { authorization: `Bearer ${token}` }

/** A timer row as a decision would have written it, with the stored command given as text. */
const insertTimer = (aggregateId: string, timerId: string, dueAt: number, command: string) =>
  Effect.flatMap(
    SqlClient,
    (sql) => sql`INSERT INTO timers (aggregate_type, aggregate_id, timer_id, generation, due_at, command, status,
      claimed_until, updated_at) VALUES ('account', ${aggregateId}, ${timerId}, 1, ${dueAt}, ${command}, 'pending',
      NULL, ${dueAt})`
  )

interface Listed {
  readonly aggregateId: string
  readonly timerId: string
  readonly status: string
  readonly command: unknown
  readonly failure: { readonly reason: string; readonly message: string } | null
}

describe("GET /v1/timers", () => {
  it.scopedLive("lists the timers that can never fire with why; other statuses on request", () =>
    Effect.gen(function* () {
      const dataDir = tempDataDir()
      // First life: the store is created and migrated.
      yield* Effect.scoped(Effect.asVoid(startServer({ dataDir })))
      // Between lives: two overdue timers that can never fire (a command cut off, a command no
      // aggregate knows), and one due in a day.
      yield* onStore(
        dataDir,
        Effect.all([
          insertTimer("acc-1", "cut", 1_000, '{"type":"account.dep'),
          insertTimer("acc-2", "unknown", 2_000, '{"type":"account.nope","accountId":"acc-2"}'),
          insertTimer("acc-3", "later", Date.now() + 86_400_000, '{"type":"account.close","accountId":"acc-3"}')
        ])
      )
      // Second life: the timer loop's first round fails the two overdue ones.
      const { url } = yield* startServer({ dataDir, env: { API_TOKEN: token } })
      const failed = yield* waitFor(
        "the two overdue timers failed",
        Effect.map(raw(url, "/v1/timers", { headers: bearer }), (r) =>
          r.status === 200 && r.body.timers.length === 2 ? (r.body.timers as ReadonlyArray<Listed>) : undefined
        )
      )
      assert.deepStrictEqual(failed.map((t) => [t.aggregateId, t.timerId, t.status, t.failure?.reason]).sort(), [
        ["acc-1", "cut", "failed", "unreadable"],
        ["acc-2", "unknown", "failed", "invalid-command"]
      ])
      const unknown = failed.find((t) => t.timerId === "unknown")!
      assert.strictEqual(unknown.failure?.message, "unknown command type 'account.nope'")
      assert.deepStrictEqual(unknown.command, { type: "account.nope", accountId: "acc-2" })
      assert.strictEqual(failed.find((t) => t.timerId === "cut")!.command, null)
      // A limit is honoured, and the pending one is listed only when asked for
      const one = yield* raw(url, "/v1/timers?status=failed&limit=1", { headers: bearer })
      assert.strictEqual(one.body.timers.length, 1)
      const pending = yield* raw(url, "/v1/timers?status=pending", { headers: bearer })
      assert.deepStrictEqual(
        pending.body.timers.map((t: Listed) => [t.timerId, t.status, t.failure]),
        [["later", "pending", null]]
      )
      // Without the token: refused, as every route not on the public list
      assert.deepStrictEqual(
        [(yield* raw(url, "/v1/timers")).status, (yield* raw(url, "/v1/timers")).body.error],
        [401, "Unauthorized"]
      )
    })
  )

  it.scopedLive("a bad status or limit is a 400 naming the parameter, never echoing a long value", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      for (const query of ["limit=0", "limit=1001", "limit=1e2", "limit=-1"]) {
        const answer = yield* exact(url, { path: `/v1/timers?${query}` })
        assert.strictEqual(answer.status, 400, query)
        assert.strictEqual(answer.body.error, "InvalidRequest")
        assert.match(answer.body.message, /^parameter 'limit' must be a whole number from 1 to 1000/, query)
      }
      const lost = yield* exact(url, { path: "/v1/timers?status=lost" })
      assert.deepStrictEqual(
        [lost.status, lost.body.error, lost.body.message],
        [400, "InvalidRequest", "parameter 'status' must be one of pending, fired, cancelled, failed, got 'lost'"]
      )
      const huge = yield* exact(url, { path: `/v1/timers?status=${"a".repeat(10_000)}` })
      assert.strictEqual(huge.status, 400)
      assert.isBelow(huge.text.length, 2_000)
      const api = yield* client(url)
      assert.deepStrictEqual(yield* api.timers.list({ urlParams: { limit: 1000 } }), { timers: [] })
    })
  )
})
