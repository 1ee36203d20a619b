import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { domain as agents } from "../src/AgentsDomain.js"
import { postJson, raw, startServer } from "./fixtures/server.js"

const token = "trigger-test-token-0123"
const bearer = { authorization: `Bearer ${token}` }

/** The next 1 January, 00:00 UTC, after now: when `0 0 1 1 *` fires next. */
const nextNewYear = () => `${new Date().getUTCFullYear() + 1}-01-01T00:00:00.000Z`

describe("GET /v1/triggers", () => {
  it.scopedLive("lists the triggers put through the front door with their next fire times; a deleted one is gone", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ domain: agents, env: { API_TOKEN: token } })
      const put = (commandId: string, triggerId: string, spec: Record<string, unknown>) =>
        postJson(url, "/v1/commands", { commandId, type: "trigger.put", triggerId, ...spec }, bearer)
      assert.strictEqual(
        (yield* put("p-1", "new-year", { cron: "0 0 1 1 *", threadId: "party", text: "happy new year" })).status,
        200
      )
      assert.strictEqual(
        (yield* put("p-2", "tokyo", { cron: "0 9 * * *", timezone: "Asia/Tokyo", threadId: "jp", text: "ohayo" }))
          .status,
        200
      )
      assert.strictEqual((yield* put("p-3", "gone", { cron: "0 0 1 1 *", threadId: "x", text: "never" })).status, 200)
      assert.strictEqual(
        (yield* postJson(url, "/v1/commands", { commandId: "d-1", type: "trigger.delete", triggerId: "gone" }, bearer))
          .status,
        200
      )
      const answer = yield* raw(url, "/v1/triggers", { headers: bearer })
      assert.strictEqual(answer.status, 200)
      const triggers = answer.body.triggers as ReadonlyArray<Record<string, unknown>>
      assert.deepStrictEqual(
        triggers.map((t) => t.triggerId),
        ["tokyo", "new-year"]
      )
      // 09:00 in Tokyo (UTC+9, no DST) is 00:00 UTC, within the next day.
      const tokyo = triggers[0]!
      assert.match(String(tokyo.nextFireAt), /T00:00:00\.000Z$/)
      const inMs = Date.parse(String(tokyo.nextFireAt)) - Date.now()
      assert.isTrue(inMs > 0 && inMs <= 24 * 3_600_000, String(tokyo.nextFireAt))
      assert.deepStrictEqual(triggers[1], {
        triggerId: "new-year",
        cron: "0 0 1 1 *",
        timezone: "UTC",
        threadId: "party",
        text: "happy new year",
        nextFireAt: nextNewYear(),
        lastFiredAt: null,
        lastDelivery: null
      })
      const limited = yield* raw(url, "/v1/triggers?limit=1", { headers: bearer })
      assert.deepStrictEqual(
        limited.body.triggers.map((t: { triggerId: string }) => t.triggerId),
        ["tokyo"]
      )
    })
  )

  it.scopedLive("refuses a request without the token, or with a wrong one", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ domain: agents, env: { API_TOKEN: token } })
      const none = yield* raw(url, "/v1/triggers")
      assert.deepStrictEqual([none.status, none.body.error], [401, "Unauthorized"])
      const wrong = yield* raw(url, "/v1/triggers", { headers: { authorization: "Bearer not-the-token-at-all" } })
      assert.deepStrictEqual([wrong.status, wrong.body.error], [401, "Unauthorized"])
    })
  )

  it.scopedLive("an invalid cron or time zone is a stored 422 rejection naming the field, and lists nothing", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ domain: agents, env: { API_TOKEN: token } })
      const bad = (commandId: string, spec: Record<string, unknown>) =>
        postJson(
          url,
          "/v1/commands",
          { commandId, type: "trigger.put", triggerId: "t", threadId: "a", text: "b", ...spec },
          bearer
        )
      const cron = yield* bad("b-1", { cron: "0 0 31 2 *" })
      assert.strictEqual(cron.status, 422)
      assert.include(JSON.stringify(cron.body), "invalid-cron")
      const zone = yield* bad("b-2", { cron: "0 9 * * *", timezone: "Europe/Atlantis" })
      assert.strictEqual(zone.status, 422)
      assert.include(JSON.stringify(zone.body), "invalid-timezone")
      const list = yield* raw(url, "/v1/triggers", { headers: bearer })
      assert.deepStrictEqual(list.body, { triggers: [] })
    })
  )

  it.scopedLive("a client cannot dispatch under the trigger: prefix a tick's message uses", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ domain: agents, env: { API_TOKEN: token } })
      const forged = yield* postJson(
        url,
        "/v1/commands",
        {
          commandId: "trigger:t:2027-01-01T00:00:00.000Z",
          type: "message.send",
          threadId: "a",
          messageId: "m",
          text: "x"
        },
        bearer
      )
      assert.strictEqual(forged.status, 400)
      assert.include(JSON.stringify(forged.body), "reserved")
    })
  )
})
