import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { EffectOutcomes } from "@orchestration/engine"
import { domain as accounts } from "./fixtures/AccountsDomain.js"
import * as ServerDomain from "../src/ServerDomain.js"
import { ThreadViews } from "../src/ThreadViews.js"
import { client, postJson, raw, startServer } from "./fixtures/server.js"

const token = "s3cret-token"

describe("health, metrics, docs and unknown routes", () => {
  it.scopedLive("/health answers 200 ok with storage, engine, reactors and outbox", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      const health = yield* raw(url, "/health")
      assert.strictEqual(health.status, 200)
      assert.strictEqual(health.body.status, "ok")
      assert.strictEqual(health.body.storage.writable, true)
      assert.isAbove(health.body.storage.freeBytes, 0)
      assert.strictEqual(health.body.storage.floorBytes, 64 * 1024 * 1024)
      assert.deepStrictEqual(health.body.reactors, [{ name: "email", lag: 0, oldestPendingAgeMs: 0 }])
      assert.deepStrictEqual(health.body.outbox, { pending: 0, running: 0, failed: 0, quarantined: 0 })
      const api = yield* client(url)
      assert.strictEqual((yield* api.ops.health()).engine.active, true)
    })
  )

  it.scopedLive(
    "/metrics is Prometheus text with dispatch latency, outcomes, outbox rows, reactor lag, reclaims and reconcile",
    () =>
      Effect.gen(function* () {
        const { url } = yield* startServer()
        yield* postJson(url, "/v1/commands", {
          commandId: "c-1",
          type: "account.open",
          accountId: "a",
          owner: "later@x"
        })
        yield* postJson(url, "/v1/commands", {
          commandId: "c-1",
          type: "account.open",
          accountId: "a",
          owner: "other@x"
        })
        const metrics = yield* raw(url, "/metrics")
        assert.strictEqual(metrics.status, 200)
        assert.include(metrics.headers.get("content-type"), "text/plain")
        const text = metrics.body as string
        for (const line of [
          "orchestration_dispatch_seconds_count 2",
          'orchestration_commands_total{outcome="accepted"} 1',
          'orchestration_commands_total{outcome="CommandIdConflict"} 1',
          'orchestration_outbox_rows{status="pending",kind="email.send"} 1',
          'orchestration_reactor_lag{reactor="email"} 0',
          "orchestration_lease_reclaims_total 0",
          'orchestration_reconciled_at_boot{result="requeued"} 0'
        ])
          assert.include(text, line)
      })
  )

  it.scopedLive("OpenAPI at /openapi.json, docs at /docs; unknown routes are 404 in the error shape", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      const spec = yield* raw(url, "/openapi.json")
      assert.strictEqual(spec.status, 200)
      for (const path of [
        "/v1/commands",
        "/v1/commands/{commandId}",
        "/v1/events",
        "/v1/events/stream",
        "/v1/threads/{threadId}",
        "/v1/threads/{threadId}/transcript",
        "/v1/effects",
        "/v1/effects/{effectId}",
        "/v1/effects/{effectId}/retry",
        "/v1/effects/{effectId}/cancel",
        "/v1/effects/{effectId}/release",
        "/v1/effects/{effectId}/fail",
        "/health",
        "/metrics"
      ]) {
        assert.property(spec.body.paths, path)
      }
      assert.property(spec.body.paths["/v1/commands"].post.responses, "422")
      const docs = yield* raw(url, "/docs")
      assert.strictEqual(docs.status, 200)
      assert.include(docs.body as string, "html")
      // A parked row's record is the engine's own schema: who parked it is one of the closed settlers,
      // not any string (the document is what clients generate their types from).
      const quarantineSchemas: Array<{ properties: Record<string, { enum?: Array<string> }> }> = []
      const walk = (node: unknown): void => {
        if (typeof node !== "object" || node === null) return
        const props = (node as { properties?: Record<string, unknown> }).properties
        if (props !== undefined && "settlement" in props && "by" in props)
          quarantineSchemas.push(node as (typeof quarantineSchemas)[number])
        for (const child of Object.values(node)) walk(child)
      }
      walk(spec.body)
      assert.isAbove(quarantineSchemas.length, 0, "the effect view documents its quarantine record")
      for (const schema of quarantineSchemas)
        assert.sameMembers(schema.properties.by?.enum ?? [], [...EffectOutcomes.SettledBy.literals])
      const unknown = yield* raw(url, "/v1/nothing-here")
      assert.strictEqual(unknown.status, 404)
      assert.deepStrictEqual(unknown.body, { error: "NotFound", message: "no route GET /v1/nothing-here" })
    })
  )
})

describe("API_TOKEN", () => {
  it.scopedLive(
    "every /v1 route needs the bearer token (401 otherwise); the stream also takes ?access_token=; /health does not",
    () =>
      Effect.gen(function* () {
        const { url } = yield* startServer({ env: { API_TOKEN: token } })
        const command = { commandId: "c-1", type: "account.open", accountId: "a", owner: "ada" }
        const anonymous = yield* postJson(url, "/v1/commands", command)
        assert.strictEqual(anonymous.status, 401)
        assert.strictEqual(anonymous.body.error, "Unauthorized")
        const wrong = yield* raw(url, "/v1/events", { headers: { authorization: "Bearer nope-nope" } })
        assert.strictEqual(wrong.status, 401)
        const unknownRoute = yield* raw(url, "/v1/whatever")
        assert.strictEqual(unknownRoute.status, 401)
        const ok = yield* postJson(url, "/v1/commands", command, { authorization: `Bearer ${token}` })
        assert.strictEqual(ok.status, 200)
        const queryOnList = yield* raw(url, `/v1/events?access_token=${token}`)
        assert.strictEqual(queryOnList.status, 401)
        const stream = yield* Effect.promise(async () => {
          const abort = new AbortController()
          const response = await fetch(`${url}/v1/events/stream?access_token=${token}`, { signal: abort.signal })
          abort.abort()
          return response.status
        })
        assert.strictEqual(stream, 200)
        const streamWithout = yield* raw(url, "/v1/events/stream")
        assert.strictEqual(streamWithout.status, 401)
        assert.strictEqual((yield* raw(url, "/health")).status, 200)
      })
  )
})

describe("thread routes", () => {
  it.scopedLive("without thread views in the domain they are 404", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      const thread = yield* raw(url, "/v1/threads/t-1")
      assert.strictEqual(thread.status, 404)
      assert.strictEqual(thread.body.error, "NotFound")
      assert.strictEqual((yield* raw(url, "/v1/threads/t-1/transcript")).status, 404)
    })
  )

  it.scopedLive("a domain's ThreadViews serve the thread and its transcript; an unknown thread is 404", () =>
    Effect.gen(function* () {
      const thread = {
        threadId: "t#1",
        title: "hello",
        status: "idle",
        turns: [
          {
            turnId: "turn-1",
            status: "completed",
            steps: 2,
            toolCalls: [
              {
                callId: "call-1",
                name: "publish",
                effectId: "tool:turn-1:call-1",
                status: "succeeded",
                result: { ok: true }
              }
            ]
          }
        ],
        messages: [{ role: "user", content: "hi" }]
      }
      const transcript = { messages: thread.messages, valid: true, problems: [] }
      const domain = ServerDomain.make({
        ...accounts,
        threads: () =>
          Layer.succeed(ThreadViews, {
            getThread: (id) => Effect.succeed(id === "t#1" ? Option.some(thread) : Option.none()),
            getTranscript: (id) => Effect.succeed(id === "t#1" ? Option.some(transcript) : Option.none())
          })
      })
      const { url } = yield* startServer({ domain })
      const found = yield* raw(url, "/v1/threads/t%231")
      assert.strictEqual(found.status, 200)
      assert.deepStrictEqual(found.body, thread)
      const api = yield* client(url)
      // HttpApiClient puts path parameters in as given: the caller encodes ids (`#` is %23).
      assert.deepStrictEqual(
        yield* api.threads.transcript({ path: { threadId: encodeURIComponent("t#1") } }),
        transcript
      )
      const missing = yield* raw(url, "/v1/threads/t-2")
      assert.strictEqual(missing.status, 404)
      assert.strictEqual(missing.body.message, "no thread 't-2'")
    })
  )
})
