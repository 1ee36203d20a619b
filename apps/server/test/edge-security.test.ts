import { HttpApi } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { ServerApi } from "../src/http/Api.js"
import { exact } from "./fixtures/rawHttp.js"
import { effectStatus, postJson, raw, startServer, waitFor } from "./fixtures/server.js"

const token = "s3cret-token"
const json = { "content-type": "application/json" }

/** Every endpoint of the API, read from its definition: a new route is covered without editing this test. */
const endpoints = (() => {
  const found: Array<{ readonly method: string; readonly path: string }> = []
  HttpApi.reflect(ServerApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) =>
      found.push({ method: endpoint.method, path: endpoint.path.replace(/:[A-Za-z]+/g, "x") })
  })
  return found
})()

/** The routes anyone may call; everything else needs the token. */
const publicApiPaths = new Set(["/health"])

/** Ways to spell one path that a router may read as the same route. */
const spellings = (path: string): Array<string> => {
  const [, first = "", ...rest] = path.split("/")
  const tail = rest.length === 0 ? "" : `/${rest.join("/")}`
  return [
    path,
    `/${path}`,
    `//${path.slice(1)}`,
    `/${first.toUpperCase()}${tail}`,
    path.toUpperCase(),
    `/%${first.charCodeAt(0).toString(16)}${first.slice(1)}${tail}`,
    `/${[...first].map((c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`).join("")}${tail}`,
    `${path}/`,
    `${path}?x=1`,
    path.replace(/\//g, "//"),
    `/./${path.slice(1)}`,
    `/v1/../${path.slice(1)}`,
    rest.length === 0 ? path : `/${first}%2F${rest.join("/")}`
  ]
}

describe("authentication is default-deny, decided on the route that matched", () => {
  it.scopedLive("every API route but /health answers 401 without the token, however its path is spelled", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ env: { API_TOKEN: token } })
      assert.isAbove(endpoints.length, 10)
      const served: Array<string> = []
      for (const endpoint of endpoints) {
        if (publicApiPaths.has(endpoint.path)) continue
        for (const path of spellings(endpoint.path)) {
          const answer = yield* exact(url, {
            method: endpoint.method,
            path,
            headers: json,
            ...(endpoint.method === "POST" ? { body: "{}" } : {})
          })
          if (answer.status !== 401 || answer.body?.error !== "Unauthorized")
            served.push(`${endpoint.method} ${path} → ${answer.status} ${answer.text.slice(0, 80)}`)
        }
      }
      assert.deepStrictEqual(served, [])
      // With the token the same routes answer (the table above is not vacuous).
      const authorised = { ...json, authorization: `Bearer ${token}` }
      for (const endpoint of endpoints) {
        if (endpoint.path === "/v1/events/stream") continue
        const answer = yield* exact(url, {
          method: endpoint.method,
          path: endpoint.path,
          headers: authorised,
          ...(endpoint.method === "POST" ? { body: "{}" } : {})
        })
        assert.notStrictEqual(answer.status, 401, `${endpoint.method} ${endpoint.path}`)
      }
    })
  )

  it.scopedLive(
    "the public list: /health, the dashboard, /docs and /openapi.json; /metrics and unknown routes need the token",
    () =>
      Effect.gen(function* () {
        const { url } = yield* startServer({ env: { API_TOKEN: token } })
        for (const path of ["/health", "//health", "/", "/index.html", "/docs", "/openapi.json"]) {
          const answer = yield* exact(url, { path })
          assert.notStrictEqual(answer.status, 401, path)
        }
        for (const path of ["/metrics", "//metrics", "/METRICS", "/nothing", "/v2/commands"]) {
          const answer = yield* exact(url, { path })
          assert.strictEqual(answer.status, 401, path)
          assert.strictEqual(answer.body.error, "Unauthorized", path)
        }
        const metrics = yield* exact(url, { path: "/metrics", headers: { authorization: `Bearer ${token}` } })
        assert.strictEqual(metrics.status, 200)
      })
  )

  it.scopedLive("HEAD of a public route is public as its GET is (a load balancer probes /health with HEAD)", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ env: { API_TOKEN: token } })
      const probe = yield* Effect.promise(() => fetch(`${url}/health`, { method: "HEAD" }))
      assert.strictEqual(probe.status, 200)
      // HEAD of a private route still needs the token.
      const events = yield* Effect.promise(() => fetch(`${url}/v1/events`, { method: "HEAD" }))
      assert.strictEqual(events.status, 401)
    })
  )
})

describe("a default server (loopback, no token) cannot be driven by another site", () => {
  it.scopedLive("a Host other than the bound address, localhost or ALLOWED_HOSTS is refused (DNS rebinding)", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ env: { ALLOWED_HOSTS: "orch.example" } })
      const port = new URL(url).port
      for (const host of [
        `evil.example:${port}`,
        "evil.example",
        `127.0.0.1.evil.example:${port}`,
        `0.0.0.0:${port}`
      ]) {
        for (const path of ["/v1/effects", "/health", "/"]) {
          const answer = yield* exact(url, { path, headers: { host } })
          assert.strictEqual(answer.status, 403, `${host} ${path}`)
          assert.strictEqual(answer.body.error, "Forbidden")
          assert.strictEqual(answer.body.reason, "foreign-host")
        }
      }
      for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, "LOCALHOST", `orch.example:${port}`]) {
        assert.strictEqual((yield* exact(url, { path: "/v1/effects", headers: { host } })).status, 200, host)
      }
    })
  )

  it.scopedLive(
    "a state-changing request from a foreign Origin is refused and changes nothing; the same origin is served",
    () =>
      Effect.gen(function* () {
        const { url } = yield* startServer()
        const port = new URL(url).port
        const command = (id: string) =>
          JSON.stringify({ commandId: id, type: "account.open", accountId: id, owner: "ada@example.com" })
        for (const origin of [
          "http://evil.example",
          "null",
          `http://127.0.0.1:${Number(port) + 1}`,
          `https://127.0.0.1:${port}`,
          "not a url"
        ]) {
          const answer = yield* exact(url, {
            method: "POST",
            path: "/v1/commands",
            headers: { ...json, origin },
            body: command("c-foreign")
          })
          assert.strictEqual(answer.status, 403, origin)
          assert.strictEqual(answer.body.error, "Forbidden")
          assert.strictEqual(answer.body.reason, "foreign-origin")
        }
        assert.strictEqual((yield* raw(url, "/v1/commands/c-foreign")).status, 404)
        const same = yield* exact(url, {
          method: "POST",
          path: "/v1/commands",
          headers: { ...json, origin: `http://127.0.0.1:${port}` },
          body: command("c-same")
        })
        assert.strictEqual(same.status, 200)
        // A read from a foreign page is not state-changing (and the browser hides its answer without CORS).
        assert.strictEqual(
          (yield* exact(url, { path: "/v1/effects", headers: { origin: "http://evil.example" } })).status,
          200
        )
      })
  )

  it.scopedLive(
    "every state-changing request must be JSON, body or not: an empty operator POST without it changes nothing",
    () =>
      Effect.gen(function* () {
        const { url } = yield* startServer()
        yield* postJson(url, "/v1/commands", {
          commandId: "o-1",
          type: "account.open",
          accountId: "acc-1",
          owner: "bounce@example.com"
        })
        const failed = yield* waitFor(
          "the bounce",
          Effect.map(effectStatus(url, "o-1:welcome"), (r) => (r.status === "failed" ? r : undefined))
        )
        for (const headers of [
          {},
          { "content-type": "text/plain" },
          { "content-type": "application/x-www-form-urlencoded" },
          { "content-type": "multipart/form-data; boundary=x" }
        ]) {
          for (const action of ["retry", "cancel"]) {
            const answer = yield* exact(url, { method: "POST", path: `/v1/effects/o-1%3Awelcome/${action}`, headers })
            assert.strictEqual(answer.status, 415, `${action} ${JSON.stringify(headers)}`)
            assert.strictEqual(answer.body.error, "UnsupportedMediaType")
          }
        }
        const after = yield* effectStatus(url, "o-1:welcome")
        assert.deepStrictEqual([after.status, after.attempts], [failed.status, failed.attempts])
        assert.strictEqual((yield* raw(url, "/v1/commands/operator:retry:o-1:welcome%231")).status, 404)
        // With the JSON content type (what the CLI and the dashboard send) the empty-body retry is served.
        const retried = yield* exact(url, { method: "POST", path: "/v1/effects/o-1%3Awelcome/retry", headers: json })
        assert.strictEqual(retried.status, 200, retried.text)
      })
  )
})
