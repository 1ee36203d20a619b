import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { client, postJson, raw, startServer } from "./fixtures/server.js"
import { openAccount as open } from "./fixtures/AccountsDomain.js"

describe("POST /v1/commands", () => {
  it.scopedLive(
    "an accepted command answers the dispatch answer; the same body again is the same answer with duplicate: true",
    () =>
      Effect.gen(function* () {
        const { url } = yield* startServer()
        const api = yield* client(url)
        const first = yield* api.commands.dispatch({ payload: open("c-1", "acc-1") })
        assert.strictEqual(first.status, "accepted")
        assert.strictEqual(first.aggregateId, "acc-1")
        assert.strictEqual(first.duplicate, false)
        assert.deepStrictEqual(first.effectIds, ["c-1:welcome"])
        assert.strictEqual(first.events[0]?.type, "account.opened")
        const again = yield* api.commands.dispatch({ payload: open("c-1", "acc-1") })
        assert.deepStrictEqual({ ...again, duplicate: false }, first)
        assert.strictEqual(again.duplicate, true)
      })
  )

  it.scopedLive("the same id with another body is 409 CommandIdConflict, and nothing is stored", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      yield* postJson(url, "/v1/commands", open("c-1", "acc-1"))
      const conflict = yield* postJson(url, "/v1/commands", open("c-1", "acc-1", "bob"))
      assert.strictEqual(conflict.status, 409)
      assert.deepStrictEqual(Object.keys(conflict.body).sort(), ["commandId", "error", "message"])
      assert.strictEqual(conflict.body.error, "CommandIdConflict")
      assert.strictEqual(conflict.body.commandId, "c-1")
      const events = yield* raw(url, "/v1/events")
      assert.strictEqual(events.body.events.length, 1)
    })
  )

  it.scopedLive("a rejection is 422, stored, and a retry gets it again with duplicate: true", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      yield* postJson(url, "/v1/commands", open("c-1", "acc-1"))
      const withdraw = { commandId: "w-1", type: "account.withdraw", accountId: "acc-1", amount: 5 }
      const first = yield* postJson(url, "/v1/commands", withdraw)
      assert.strictEqual(first.status, 422)
      assert.strictEqual(first.body.error, "CommandRejected")
      assert.strictEqual(first.body.reason, "insufficient-funds")
      assert.strictEqual(first.body.duplicate, false)
      const again = yield* postJson(url, "/v1/commands", withdraw)
      assert.strictEqual(again.status, 422)
      assert.strictEqual(again.body.duplicate, true)
      const receipt = yield* raw(url, "/v1/commands/w-1")
      assert.strictEqual(receipt.body.status, "rejected")
      assert.deepStrictEqual(receipt.body.rejection, { reason: "insufficient-funds", message: "balance too low" })
    })
  )

  it.scopedLive(
    "malformed commands are 400 InvalidCommand with issues: schema, unknown type, bad JSON, no object",
    () =>
      Effect.gen(function* () {
        const { url } = yield* startServer()
        const schema = yield* postJson(url, "/v1/commands", {
          commandId: "c-1",
          type: "account.deposit",
          accountId: "a",
          amount: "ten"
        })
        assert.strictEqual(schema.status, 400)
        assert.strictEqual(schema.body.error, "InvalidCommand")
        assert.strictEqual(schema.body.commandId, "c-1")
        assert.deepStrictEqual(schema.body.issues[0].path, ["amount"])
        const unknown = yield* postJson(url, "/v1/commands", {
          commandId: "c-2",
          type: "account.teleport",
          accountId: "a"
        })
        assert.strictEqual(unknown.status, 400)
        assert.include(unknown.body.message, "unknown command type")
        const badJson = yield* raw(url, "/v1/commands", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: "{nope"
        })
        assert.strictEqual(badJson.status, 400)
        assert.strictEqual(badJson.body.error, "InvalidCommand")
        assert.deepStrictEqual(badJson.body.issues, [])
        const array = yield* postJson(url, "/v1/commands", [1, 2])
        assert.strictEqual(array.status, 400)
        assert.strictEqual(array.body.error, "InvalidCommand")
      })
  )

  it.scopedLive("clients cannot send the engine's internal types or reserved id prefixes (400)", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      yield* postJson(url, "/v1/commands", open("c-1", "acc-1"))
      const forgedSettle = {
        commandId: "x-1",
        type: "effect.succeed",
        effectId: "c-1:welcome",
        attempt: 1,
        aggregateType: "account",
        aggregateId: "acc-1",
        by: "reactor",
        response: null
      }
      for (const body of [
        forgedSettle,
        { ...forgedSettle, type: "effect.retry" },
        { commandId: "x-2", type: "engine.anything" },
        ...["outcome:", "reconcile:", "reclaim:", "delegate:", "operator:", "ingest:", "engine:"].map((prefix) =>
          open(`${prefix}c-9`, "acc-9")
        )
      ]) {
        const answer = yield* postJson(url, "/v1/commands", body)
        assert.strictEqual(answer.status, 400, JSON.stringify(body))
        assert.strictEqual(answer.body.error, "InvalidCommand")
      }
      const events = yield* raw(url, "/v1/events")
      assert.strictEqual(events.body.events.length, 1)
    })
  )

  it.scopedLive("a body over 1 MiB is 413 and a non-JSON content type is 415, in the error shape", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      const big = yield* postJson(url, "/v1/commands", { ...open("c-1", "acc-1"), owner: "x".repeat(1024 * 1024 + 10) })
      assert.strictEqual(big.status, 413)
      assert.strictEqual(big.body.error, "PayloadTooLarge")
      assert.strictEqual(big.body.limitBytes, 1024 * 1024)
      const text = yield* raw(url, "/v1/commands", {
        method: "POST",
        headers: { "content-type": "text/plain" },
        body: JSON.stringify(open("c-2", "a"))
      })
      assert.strictEqual(text.status, 415)
      assert.strictEqual(text.body.error, "UnsupportedMediaType")
      const none = yield* raw(url, "/v1/commands", { method: "POST", body: new Uint8Array([123, 125]) })
      assert.strictEqual(none.status, 415)
      const events = yield* raw(url, "/v1/events")
      assert.strictEqual(events.body.events.length, 0)
    })
  )

  it.scopedLive("a decider that throws is 500 CommandDefect; the server keeps serving", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      const boom = yield* postJson(url, "/v1/commands", { commandId: "b-1", type: "account.explode", accountId: "a" })
      assert.strictEqual(boom.status, 500)
      assert.strictEqual(boom.body.error, "CommandDefect")
      assert.strictEqual(boom.body.stage, "decide")
      const ok = yield* postJson(url, "/v1/commands", open("c-1", "acc-1"))
      assert.strictEqual(ok.status, 200)
    })
  )

  it.scopedLive("once shutdown begins, commands are 503 EngineUnavailable with Retry-After and /health is 503", () =>
    Effect.gen(function* () {
      const { url, engine } = yield* startServer()
      yield* engine.stopAdmitting
      const refused = yield* postJson(url, "/v1/commands", open("c-1", "acc-1"))
      assert.strictEqual(refused.status, 503)
      assert.strictEqual(refused.body.error, "EngineUnavailable")
      assert.strictEqual(refused.body.reason, "shutting-down")
      assert.strictEqual(refused.headers.get("retry-after"), "1")
      const health = yield* raw(url, "/health")
      assert.strictEqual(health.status, 503)
      assert.strictEqual(health.body.status, "unavailable")
    })
  )
})

describe("GET /v1/commands/:commandId", () => {
  it.scopedLive("answers the receipt (ids with # are URL-encoded), or 404 NotFound", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      yield* postJson(url, "/v1/commands", open("open#1", "acc-1"))
      yield* postJson(url, "/v1/commands", { commandId: "touch-1", type: "account.touch", accountId: "acc-1" })
      const receipt = yield* raw(url, `/v1/commands/${encodeURIComponent("open#1")}`)
      assert.strictEqual(receipt.status, 200)
      assert.deepStrictEqual(
        { ...receipt.body, acceptedAt: 0 },
        {
          commandId: "open#1",
          status: "accepted",
          aggregateType: "account",
          aggregateId: "acc-1",
          commandType: "account.open",
          sequence: 1,
          effectIds: ["open#1:welcome"],
          acceptedAt: 0
        }
      )
      const api = yield* client(url)
      const touched = yield* api.commands.receipt({ path: { commandId: "touch-1" } })
      assert.strictEqual(touched.sequence, 1)
      assert.deepStrictEqual(touched.effectIds, [])
      const missing = yield* api.commands.receipt({ path: { commandId: "nope" } }).pipe(Effect.flip)
      assert.strictEqual(missing._tag, "NotFound")
      const rawMissing = yield* raw(url, "/v1/commands/nope")
      assert.strictEqual(rawMissing.status, 404)
      assert.strictEqual(rawMissing.body.error, "NotFound")
    })
  )
})
