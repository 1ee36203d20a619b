import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import {
  client,
  effectStatus,
  firstLife,
  onStore,
  postJson,
  raw,
  startServer,
  tempDataDir,
  waitFor
} from "./fixtures/server.js"
import { openAccount as open } from "./fixtures/AccountsDomain.js"

describe("quarantined effects over HTTP", () => {
  it.scopedLive(
    "the server boots with effects whose aggregate cannot be replayed: health degraded, listed, released or failed by an operator",
    () =>
      Effect.gen(function* () {
        const dataDir = tempDataDir()
        // First life: two accounts whose welcome mails are due in an hour.
        yield* firstLife(dataDir, [
          open("o-1", "acc-1", "later@example.com"),
          open("o-2", "acc-2", "later@example.com")
        ])
        // Between lives: a process that died had claimed both, and both accounts' logs stopped decoding.
        const original = yield* onStore(
          dataDir,
          Effect.gen(function* () {
            const sql = yield* SqlClient
            const [event] = yield* sql<{ payload: string }>`SELECT payload FROM events WHERE aggregate_id = 'acc-1'`
            yield* sql`UPDATE outbox SET status = 'running', attempts = 1, lease_owner = 'dead-process', lease_expires_at = 0`
            yield* sql`UPDATE events SET payload = '{"type":"account.opened","owner":42}'`
            return event!.payload
          })
        )

        yield* Effect.scoped(
          Effect.gen(function* () {
            const { url } = yield* startServer({ dataDir })
            const health = yield* raw(url, "/health")
            assert.strictEqual(health.status, 200)
            assert.strictEqual(health.body.status, "degraded")
            assert.strictEqual(health.body.outbox.quarantined, 2)
            const api = yield* client(url)
            const parked = yield* api.effects.list({ urlParams: { status: "quarantined" } })
            assert.deepStrictEqual(
              parked.effects.map((e) => [e.effectId, e.quarantine?.reason, e.quarantine?.by]),
              [
                ["o-1:welcome", "aggregate-unavailable", "reconcile"],
                ["o-2:welcome", "aggregate-unavailable", "reconcile"]
              ]
            )
            // Every other aggregate is served.
            yield* postJson(url, "/v1/commands", open("o-3", "acc-3", "ada@example.com"))
            yield* waitFor(
              "acc-3's mail",
              Effect.map(effectStatus(url, "o-3:welcome"), (r) => (r.status === "succeeded" ? r : undefined))
            )
            // Released while the cause is still there: refused, still parked.
            const still = yield* raw(url, "/v1/effects/o-1%3Awelcome/release", {
              method: "POST",
              headers: { "content-type": "application/json" }
            })
            assert.strictEqual(still.status, 409)
            assert.strictEqual(still.body.error, "EffectStillQuarantined")
            assert.strictEqual(still.body.reason, "aggregate-unavailable")
            // Failed by the operator, with a reason; a bad body names the rule without echoing the value.
            const noReason = yield* postJson(url, "/v1/effects/o-2%3Awelcome/fail", { reason: "" })
            assert.strictEqual(noReason.status, 400)
            assert.strictEqual(noReason.body.error, "InvalidRequest")
            const tooLong = yield* postJson(url, "/v1/effects/o-2%3Awelcome/fail", { reason: "x".repeat(501) })
            assert.strictEqual(tooLong.status, 400)
            assert.notInclude(JSON.stringify(tooLong.body), "x".repeat(501))
            const failed = yield* api.effects.fail({
              path: { effectId: "o-2:welcome" },
              payload: { reason: "account closed by support" }
            })
            assert.strictEqual(failed.status, "failed")
            assert.deepStrictEqual(failed.error, {
              message: "account closed by support",
              code: "failed-by-operator",
              reason: "operator"
            })
            const twice = yield* postJson(url, "/v1/effects/o-2%3Awelcome/fail", { reason: "again" })
            assert.strictEqual(twice.status, 409)
            assert.strictEqual(twice.body.error, "EffectNotQuarantined")
            const notParked = yield* raw(url, "/v1/effects/o-3%3Awelcome/release", {
              method: "POST",
              headers: { "content-type": "application/json" }
            })
            assert.strictEqual(notParked.status, 409)
            assert.strictEqual(notParked.body.error, "EffectNotQuarantined")
            assert.strictEqual(
              (yield* raw(url, "/v1/effects/nope/release", {
                method: "POST",
                headers: { "content-type": "application/json" }
              })).status,
              404
            )
            assert.strictEqual((yield* raw(url, "/health")).body.outbox.quarantined, 1)
          })
        )

        // The log is repaired; the next life boots too, and the operator releases the last row.
        yield* onStore(
          dataDir,
          Effect.flatMap(SqlClient, (sql) => sql`UPDATE events SET payload = ${original} WHERE aggregate_id = 'acc-1'`)
        )
        const { url } = yield* startServer({ dataDir })
        assert.strictEqual((yield* raw(url, "/health")).body.outbox.quarantined, 1)
        const released = yield* raw(url, "/v1/effects/o-1%3Awelcome/release", {
          method: "POST",
          headers: { "content-type": "application/json" }
        })
        assert.strictEqual(released.status, 200, JSON.stringify(released.body))
        assert.strictEqual(released.body.commandId, "reconcile:o-1:welcome#1")
        // Replay-safe: the parked settlement requeued it, and the mail goes out now.
        yield* waitFor(
          "acc-1's mail",
          Effect.map(effectStatus(url, "o-1:welcome"), (r) => (r.status === "succeeded" ? r : undefined))
        )
        const health = yield* raw(url, "/health")
        assert.strictEqual(health.body.outbox.quarantined, 0)
        assert.strictEqual(health.body.status, "ok")
      })
  )
})
