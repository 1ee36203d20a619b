import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { client, effectStatus, postJson, raw, startServer, waitFor } from "./fixtures/server.js"

const open = (id: string, accountId: string, owner: string) => ({ commandId: id, type: "account.open", accountId, owner })

describe("the outbox over HTTP", () => {
  it.scopedLive("lists effects by status, kind and aggregate, and shows one row with its lease and outcome", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      yield* postJson(url, "/v1/commands", open("o-1", "acc-1", "ada@example.com"))
      yield* postJson(url, "/v1/commands", open("o-2", "acc-2", "later@example.com"))
      yield* waitFor("the welcome mail", Effect.map(effectStatus(url, "o-1:welcome"), (r) => (r.status === "succeeded" ? r : undefined)))
      const api = yield* client(url)
      const all = yield* api.effects.list({ urlParams: {} })
      assert.deepStrictEqual(all.effects.map((e) => [e.effectId, e.status]), [["o-1:welcome", "succeeded"], ["o-2:welcome", "pending"]])
      const pending = yield* api.effects.list({ urlParams: { status: "pending" } })
      assert.deepStrictEqual(pending.effects.map((e) => e.effectId), ["o-2:welcome"])
      const byAggregate = yield* api.effects.list({ urlParams: { aggregateId: "acc-1", kind: "email.send", limit: 5 } })
      assert.deepStrictEqual(byAggregate.effects.map((e) => e.effectId), ["o-1:welcome"])
      const one = yield* api.effects.get({ path: { effectId: "o-1:welcome" } })
      assert.strictEqual(one.attempts, 1)
      assert.deepStrictEqual(one.response, { delivered: "ada@example.com" })
      assert.strictEqual(one.leaseOwner, null)
      const missing = yield* raw(url, "/v1/effects/nope")
      assert.strictEqual(missing.status, 404)
      assert.strictEqual(missing.body.error, "NotFound")
      const badStatus = yield* raw(url, "/v1/effects?status=lost")
      assert.strictEqual(badStatus.status, 400)
      assert.strictEqual(badStatus.body.error, "InvalidRequest")
    }))

  it.scopedLive("retry sends a failed effect back to be performed, under the default operator id; repeating it is a duplicate", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      yield* postJson(url, "/v1/commands", open("o-1", "acc-1", "bounce@example.com"))
      const failed = yield* waitFor("the bounce", Effect.map(effectStatus(url, "o-1:welcome"), (r) => (r.status === "failed" ? r : undefined)))
      assert.strictEqual(failed.attempts, 1)
      const retried = yield* raw(url, "/v1/effects/o-1%3Awelcome/retry", { method: "POST", headers: { "content-type": "application/json" } })
      assert.strictEqual(retried.status, 200)
      assert.strictEqual(retried.body.commandId, "operator:retry:o-1:welcome#1")
      assert.strictEqual(retried.body.duplicate, false)
      // The same retry again, under the id it was answered with, is answered from its receipt
      // (the row may already have run again; the command id pins the attempt it was about).
      const repeat = yield* postJson(url, "/v1/effects/o-1%3Awelcome/retry", { commandId: "operator:retry:o-1:welcome#1" })
      const again = yield* waitFor("the second attempt", Effect.map(effectStatus(url, "o-1:welcome"), (r) => (r.status === "failed" && r.attempts === 2 ? r : undefined)))
      assert.strictEqual(again.attempts, 2)
      assert.isTrue(
        (repeat.status === 200 && repeat.body.duplicate === true && repeat.body.sequence === retried.body.sequence) ||
          // Sent after the row moved to attempt 2: the id names a retry of attempt 1, so it conflicts.
          (repeat.status === 409 && repeat.body.error === "CommandIdConflict"),
        JSON.stringify(repeat)
      )
      // The old id now names a retry of another attempt: a conflict, never a silent success.
      const old = yield* postJson(url, "/v1/effects/o-1%3Awelcome/retry", { commandId: "operator:retry:o-1:welcome#1" })
      assert.strictEqual(old.status, 409)
      assert.strictEqual(old.body.error, "CommandIdConflict")
      const next = yield* raw(url, "/v1/effects/o-1%3Awelcome/retry", { method: "POST", headers: { "content-type": "application/json" } })
      assert.strictEqual(next.body.commandId, "operator:retry:o-1:welcome#2")
      // Retrying a row that is not failed or cancelled is refused and stored (422).
      yield* postJson(url, "/v1/commands", open("o-2", "acc-2", "ada@example.com"))
      yield* waitFor("the welcome mail", Effect.map(effectStatus(url, "o-2:welcome"), (r) => (r.status === "succeeded" ? r : undefined)))
      const notFailed = yield* raw(url, "/v1/effects/o-2%3Awelcome/retry", { method: "POST", headers: { "content-type": "application/json" } })
      assert.strictEqual(notFailed.status, 422)
      assert.strictEqual(notFailed.body.error, "CommandRejected")
    }))

  it.scopedLive("cancel stops a pending effect; the body is optional but must be { commandId } with a client id", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      yield* postJson(url, "/v1/commands", open("o-1", "acc-1", "later@example.com"))
      const badBody = yield* postJson(url, "/v1/effects/o-1%3Awelcome/cancel", { reason: "x" })
      assert.strictEqual(badBody.status, 400)
      assert.strictEqual(badBody.body.error, "InvalidRequest")
      const forged = yield* postJson(url, "/v1/effects/o-1%3Awelcome/cancel", { commandId: "outcome:o-1:welcome#0" })
      assert.strictEqual(forged.status, 400)
      const notJson = yield* raw(url, "/v1/effects/o-1%3Awelcome/cancel", { method: "POST", headers: { "content-type": "text/plain" }, body: "x" })
      assert.strictEqual(notJson.status, 415)
      const api = yield* client(url)
      const cancelled = yield* api.effects.cancel({ path: { effectId: "o-1:welcome" }, payload: { commandId: "cancel-1" } })
      assert.strictEqual(cancelled.commandId, "cancel-1")
      assert.strictEqual((yield* effectStatus(url, "o-1:welcome")).status, "cancelled")
      const unknown = yield* raw(url, "/v1/effects/nope/cancel", { method: "POST", headers: { "content-type": "application/json" } })
      assert.strictEqual(unknown.status, 404)
      // The operator's action is in the log's audit trail as a command with a receipt.
      const receipt = yield* raw(url, "/v1/commands/cancel-1")
      assert.strictEqual(receipt.body.commandType, "effect.cancel")
    }))
})
