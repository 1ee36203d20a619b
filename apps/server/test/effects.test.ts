import { assert, describe, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql/SqlClient"
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

describe("the outbox over HTTP", () => {
  it.scopedLive("lists effects by status, kind and aggregate, and shows one row with its lease and outcome", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      yield* postJson(url, "/v1/commands", open("o-1", "acc-1", "ada@example.com"))
      yield* postJson(url, "/v1/commands", open("o-2", "acc-2", "later@example.com"))
      yield* waitFor(
        "the welcome mail",
        Effect.map(effectStatus(url, "o-1:welcome"), (r) => (r.status === "succeeded" ? r : undefined))
      )
      const api = yield* client(url)
      const all = yield* api.effects.list({ urlParams: {} })
      assert.deepStrictEqual(
        all.effects.map((e) => [e.effectId, e.status]),
        [
          ["o-1:welcome", "succeeded"],
          ["o-2:welcome", "pending"]
        ]
      )
      const pending = yield* api.effects.list({ urlParams: { status: "pending" } })
      assert.deepStrictEqual(
        pending.effects.map((e) => e.effectId),
        ["o-2:welcome"]
      )
      const byAggregate = yield* api.effects.list({ urlParams: { aggregateId: "acc-1", kind: "email.send", limit: 5 } })
      assert.deepStrictEqual(
        byAggregate.effects.map((e) => e.effectId),
        ["o-1:welcome"]
      )
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
    })
  )

  it.scopedLive("a row whose stored payload or quarantine record is not JSON lists with them null and says why", () =>
    Effect.gen(function* () {
      const dataDir = tempDataDir()
      // First life: an account whose welcome mail is due in an hour.
      yield* firstLife(dataDir, [open("o-1", "acc-1", "later@example.com")])
      // Between lives: its payload and the record of a past quarantine are cut off, as a bad migration
      // or a hand edit would leave them.
      yield* onStore(
        dataDir,
        Effect.flatMap(
          SqlClient,
          (sql) => sql`UPDATE outbox SET payload = '{"to":', quarantine = '{"reason":' WHERE effect_id = 'o-1:welcome'`
        )
      )
      const { url } = yield* startServer({ dataDir })
      const api = yield* client(url)
      const one = yield* api.effects.get({ path: { effectId: "o-1:welcome" } })
      assert.strictEqual(one.payload, null)
      assert.match(one.undecodable ?? "", /not (valid )?JSON/)
      assert.strictEqual(one.quarantine, null)
      assert.match(one.quarantineUnreadable ?? "", /quarantine record is not JSON/)
      const listed = yield* api.effects.list({ urlParams: {} })
      assert.deepStrictEqual(
        listed.effects.map((e) => [e.effectId, e.payload, typeof e.undecodable, typeof e.quarantineUnreadable]),
        [["o-1:welcome", null, "string", "string"]]
      )
    })
  )

  it.scopedLive("a row whose stored quarantine record is JSON of another shape lists with it null and says why", () =>
    Effect.gen(function* () {
      const dataDir = tempDataDir()
      yield* firstLife(dataDir, [open("o-1", "acc-1", "later@example.com")])
      // Valid JSON, but no record: trusted as one, its missing fields failed the view's encoding.
      yield* onStore(
        dataDir,
        Effect.flatMap(
          SqlClient,
          (sql) => sql`UPDATE outbox SET quarantine = '{"foo":1}' WHERE effect_id = 'o-1:welcome'`
        )
      )
      const { url } = yield* startServer({ dataDir })
      const one = yield* raw(url, "/v1/effects/o-1%3Awelcome")
      assert.strictEqual(one.status, 200)
      assert.strictEqual(one.body.quarantine, null)
      assert.strictEqual(
        one.body.quarantineUnreadable,
        "its stored quarantine record does not have the expected shape (reason is missing)"
      )
      const listed = yield* raw(url, "/v1/effects")
      assert.strictEqual(listed.status, 200)
    })
  )

  it.scopedLive(
    "retry sends a failed effect back to be performed, under the default operator id; repeating it is a duplicate",
    () =>
      Effect.gen(function* () {
        const { url } = yield* startServer()
        yield* postJson(url, "/v1/commands", open("o-1", "acc-1", "bounce@example.com"))
        const failed = yield* waitFor(
          "the bounce",
          Effect.map(effectStatus(url, "o-1:welcome"), (r) => (r.status === "failed" ? r : undefined))
        )
        assert.strictEqual(failed.attempts, 1)
        const retried = yield* raw(url, "/v1/effects/o-1%3Awelcome/retry", {
          method: "POST",
          headers: { "content-type": "application/json" }
        })
        assert.strictEqual(retried.status, 200)
        // The default id names the row as the request found it: attempt 1, no operator action yet.
        assert.strictEqual(retried.body.commandId, "operator:retry:o-1:welcome#1.0")
        assert.strictEqual(retried.body.duplicate, false)
        const again = yield* waitFor(
          "the second attempt",
          Effect.map(effectStatus(url, "o-1:welcome"), (r) =>
            r.status === "failed" && r.attempts === 2 ? r : undefined
          )
        )
        assert.strictEqual(again.attempts, 2)
        // The same retry again, under the id it was answered with, is answered from its receipt even
        // though the row has moved on since: the command is what the operator sent, not the row's state.
        const repeat = yield* postJson(url, "/v1/effects/o-1%3Awelcome/retry", {
          commandId: "operator:retry:o-1:welcome#1.0"
        })
        assert.strictEqual(repeat.status, 200, JSON.stringify(repeat.body))
        assert.deepStrictEqual(repeat.body, { ...retried.body, duplicate: true })
        // A plain retry now is a new action: the row counts the first one.
        const next = yield* raw(url, "/v1/effects/o-1%3Awelcome/retry", {
          method: "POST",
          headers: { "content-type": "application/json" }
        })
        assert.strictEqual(next.body.commandId, "operator:retry:o-1:welcome#2.1")
        assert.strictEqual(next.body.duplicate, false)
        // Retrying a row that is not failed or cancelled is refused (409, with the reason) and not stored.
        yield* postJson(url, "/v1/commands", open("o-2", "acc-2", "ada@example.com"))
        yield* waitFor(
          "the welcome mail",
          Effect.map(effectStatus(url, "o-2:welcome"), (r) => (r.status === "succeeded" ? r : undefined))
        )
        const notFailed = yield* raw(url, "/v1/effects/o-2%3Awelcome/retry", {
          method: "POST",
          headers: { "content-type": "application/json" }
        })
        assert.strictEqual(notFailed.status, 409)
        assert.strictEqual(notFailed.body.error, "EffectActionRefused")
        assert.strictEqual(notFailed.body.reason, "not-retryable")
        const notStored = yield* raw(url, `/v1/commands/${encodeURIComponent("operator:retry:o-2:welcome#1.0")}`)
        assert.strictEqual(notStored.status, 404)
      })
  )

  it.scopedLive(
    "a retry refused while the effect runs does not block the next one; a repeated commandId is answered from its receipt after the row moved on",
    () =>
      Effect.gen(function* () {
        // Each send takes 1.5 s, so the effect is seen running; a bounce then fails it for good.
        const { url } = yield* startServer({ env: { EMAIL_DELAY_MS: "1500" } })
        const path = "/v1/effects/o-1%3Awelcome/retry"
        yield* postJson(url, "/v1/commands", open("o-1", "acc-1", "bounce@example.com"))
        yield* waitFor(
          "the send to run",
          Effect.map(effectStatus(url, "o-1:welcome"), (r) => (r.status === "running" ? r : undefined))
        )
        const early = yield* postJson(url, path, {})
        assert.strictEqual(early.status, 409, JSON.stringify(early.body))
        assert.strictEqual(early.body.error, "EffectActionRefused")
        assert.strictEqual(early.body.reason, "not-retryable")
        yield* waitFor(
          "the bounce",
          Effect.map(effectStatus(url, "o-1:welcome"), (r) => (r.status === "failed" ? r : undefined))
        )
        // The refusal was not stored under the default id: the plain retry the operator sends now is performed.
        const retried = yield* postJson(url, path, {})
        assert.strictEqual(retried.status, 200, JSON.stringify(retried.body))
        assert.strictEqual(retried.body.duplicate, false)
        // Sent twice, a plain retry is one retry: the repeat finds the row as the retry left it (its
        // receipt answers), or already running again (refused, not stored); never a second retry.
        const twice = yield* postJson(url, path, {})
        assert.isTrue(
          (twice.status === 200 && twice.body.duplicate === true && twice.body.commandId === retried.body.commandId) ||
            (twice.status === 409 && twice.body.reason === "not-retryable"),
          JSON.stringify(twice.body)
        )
        yield* waitFor(
          "the second bounce",
          Effect.map(effectStatus(url, "o-1:welcome"), (r) =>
            r.status === "failed" && r.attempts === 2 ? r : undefined
          )
        )

        // The client's own id, sent twice with the same body around a change of the row: one retry.
        const chosen = yield* postJson(url, path, { commandId: "retry-o-1" })
        assert.strictEqual(chosen.status, 200, JSON.stringify(chosen.body))
        assert.strictEqual(chosen.body.duplicate, false)
        yield* waitFor(
          "the third bounce",
          Effect.map(effectStatus(url, "o-1:welcome"), (r) =>
            r.status === "failed" && r.attempts === 3 ? r : undefined
          )
        )
        const repeated = yield* postJson(url, path, { commandId: "retry-o-1" })
        assert.strictEqual(repeated.status, 200, JSON.stringify(repeated.body))
        assert.deepStrictEqual(repeated.body, { ...chosen.body, duplicate: true })
        assert.strictEqual((yield* effectStatus(url, "o-1:welcome")).status, "failed")
      })
  )

  it.scopedLive("cancel stops a pending effect; the body is optional but must be { commandId } with a client id", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      yield* postJson(url, "/v1/commands", open("o-1", "acc-1", "later@example.com"))
      const badBody = yield* postJson(url, "/v1/effects/o-1%3Awelcome/cancel", { reason: "x" })
      assert.strictEqual(badBody.status, 400)
      assert.strictEqual(badBody.body.error, "InvalidRequest")
      const forged = yield* postJson(url, "/v1/effects/o-1%3Awelcome/cancel", { commandId: "outcome:o-1:welcome#0" })
      assert.strictEqual(forged.status, 400)
      const notJson = yield* raw(url, "/v1/effects/o-1%3Awelcome/cancel", {
        method: "POST",
        headers: { "content-type": "text/plain" },
        body: "x"
      })
      assert.strictEqual(notJson.status, 415)
      const api = yield* client(url)
      const cancelled = yield* api.effects.cancel({
        path: { effectId: "o-1:welcome" },
        payload: { commandId: "cancel-1" }
      })
      assert.strictEqual(cancelled.commandId, "cancel-1")
      assert.strictEqual((yield* effectStatus(url, "o-1:welcome")).status, "cancelled")
      const unknown = yield* raw(url, "/v1/effects/nope/cancel", {
        method: "POST",
        headers: { "content-type": "application/json" }
      })
      assert.strictEqual(unknown.status, 404)
      // The operator's action is in the log's audit trail as a command with a receipt.
      const receipt = yield* raw(url, "/v1/commands/cancel-1")
      assert.strictEqual(receipt.body.commandType, "effect.cancel")
    })
  )

  it.scopedLive(
    "an operator: id chosen by the client must be one of this action on this effect, not another's default",
    () =>
      Effect.gen(function* () {
        const { url } = yield* startServer()
        yield* postJson(url, "/v1/commands", open("a-1", "acc-a", "later@example.com"))
        yield* postJson(url, "/v1/commands", open("b-1", "acc-b", "later@example.com"))
        // B's default cancel id, sent to cancel A: had it been taken, B's default cancel would meet a receipt of
        // another payload (409 CommandIdConflict) until its row changed.
        const squatted = yield* postJson(url, "/v1/effects/a-1%3Awelcome/cancel", {
          commandId: "operator:cancel:b-1:welcome#0.0"
        })
        assert.strictEqual(squatted.status, 400, JSON.stringify(squatted.body))
        assert.strictEqual(squatted.body.error, "InvalidRequest")
        assert.strictEqual((yield* effectStatus(url, "a-1:welcome")).status, "pending")
        // A default id of a state the row has not reached (more attempts or more actions) would be the id
        // of a later plain request, answered then from this one's receipt and not applied.
        for (const commandId of [
          "operator:retry:a-1:welcome#0.0",
          "operator:cancel:a-1:welcome#x",
          "operator:cancel:a-1",
          "operator:cancel:a-1:welcome#0.1",
          "operator:cancel:a-1:welcome#1.0"
        ]) {
          const wrong = yield* postJson(url, "/v1/effects/a-1%3Awelcome/cancel", { commandId })
          assert.strictEqual(wrong.status, 400, commandId)
        }
        const cancelB = yield* postJson(url, "/v1/effects/b-1%3Awelcome/cancel", {})
        assert.strictEqual(cancelB.status, 200, JSON.stringify(cancelB.body))
        assert.strictEqual(cancelB.body.commandId, "operator:cancel:b-1:welcome#0.0")
        // This effect's own id of that form is taken as the client's (a retry of an earlier answer).
        const own = yield* postJson(url, "/v1/effects/a-1%3Awelcome/cancel", {
          commandId: "operator:cancel:a-1:welcome#0.0"
        })
        assert.strictEqual(own.status, 200, JSON.stringify(own.body))
        assert.strictEqual((yield* effectStatus(url, "a-1:welcome")).status, "cancelled")
      })
  )

  it.scopedLive(
    "an effect whose id is longer than 100 characters is served and cancelled by its id, behind the token",
    () =>
      Effect.gen(function* () {
        const { url } = yield* startServer({ env: { API_TOKEN: "long-id-token" } })
        const auth = { authorization: "Bearer long-id-token" }
        // Client command ids may be 128 characters, so effect ids derived from them are longer still.
        const commandId = `o-${"x".repeat(126)}`
        const effectId = `${commandId}:welcome`
        const path = `/v1/effects/${encodeURIComponent(effectId)}`
        const opened = yield* raw(url, "/v1/commands", {
          method: "POST",
          headers: { ...auth, "content-type": "application/json" },
          body: JSON.stringify(open(commandId, "acc-long", "later@example.com"))
        })
        assert.strictEqual(opened.status, 200)
        // The route is matched for the access decision too: without the token it is refused, not missing.
        assert.strictEqual((yield* raw(url, path)).status, 401)
        const one = yield* raw(url, path, { headers: auth })
        assert.strictEqual(one.status, 200)
        assert.strictEqual(one.body.effectId, effectId)
        const cancelled = yield* raw(url, `${path}/cancel`, {
          method: "POST",
          headers: { ...auth, "content-type": "application/json" }
        })
        assert.strictEqual(cancelled.status, 200)
        assert.strictEqual((yield* raw(url, path, { headers: auth })).body.status, "cancelled")
      })
  )
})
