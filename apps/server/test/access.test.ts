import { assert, describe, it } from "@effect/vitest"
import { type AccessRequest, decideAccess, hostName, policyOf } from "../src/http/Access.js"

const equal = (a: string, b: string) => a === b
const request = (overrides: Partial<AccessRequest> = {}): AccessRequest => ({
  method: "GET",
  route: "/v1/effects",
  host: "127.0.0.1:8787",
  origin: undefined,
  contentType: undefined,
  token: undefined,
  ...overrides
})
const refusal = (
  req: AccessRequest,
  policy = policyOf({ boundHost: "127.0.0.1", allowedHosts: [], token: undefined })
) => {
  const answer = decideAccess(req, policy, equal)
  return answer === undefined ? "allowed" : answer._tag === "Forbidden" ? `Forbidden:${answer.reason}` : answer._tag
}

describe("access decisions", () => {
  it("given no token on loopback, when a local client reads or writes JSON, then it is allowed", () => {
    assert.strictEqual(refusal(request()), "allowed")
    assert.strictEqual(
      refusal(request({ method: "POST", route: "/v1/commands", contentType: "application/json; charset=utf-8" })),
      "allowed"
    )
    assert.strictEqual(refusal(request({ host: "localhost:8787" })), "allowed")
    assert.strictEqual(refusal(request({ host: "[::1]:8787" })), "allowed")
  })

  it("given any policy, when Host names another server (DNS rebinding) or is missing, then it is forbidden", () => {
    for (const host of ["evil.example", "evil.example:8787", "127.0.0.1.evil.example", undefined]) {
      assert.strictEqual(refusal(request({ host })), "Forbidden:foreign-host", String(host))
    }
    const wildcard = policyOf({ boundHost: "0.0.0.0", allowedHosts: ["orch.example"], token: "t" })
    assert.strictEqual(refusal(request({ host: "0.0.0.0:8787", token: "t" }), wildcard), "Forbidden:foreign-host")
    assert.strictEqual(refusal(request({ host: "orch.example", token: "t" }), wildcard), "allowed")
  })

  it("given a token, when the matched route is not public (or none matched), then the token is required", () => {
    const policy = policyOf({ boundHost: "127.0.0.1", allowedHosts: [], token: "secret-1" })
    for (const route of ["/v1/effects", "/metrics", "/v1/effects/:effectId/cancel", undefined]) {
      assert.strictEqual(refusal(request({ route }), policy), "Unauthorized", String(route))
      assert.strictEqual(refusal(request({ route, token: "wrong" }), policy), "Unauthorized", String(route))
      assert.strictEqual(refusal(request({ route, token: "secret-1" }), policy), "allowed", String(route))
    }
    for (const route of ["/health", "/", "/index.html", "/assets/*", "/docs", "/openapi.json"]) {
      assert.strictEqual(refusal(request({ route }), policy), "allowed", route)
    }
  })

  it("given a state-changing request, when its Origin is foreign or it is not JSON, then it is refused, body or not", () => {
    const post = (overrides: Partial<AccessRequest>) =>
      request({ method: "POST", route: "/v1/effects/:effectId/cancel", contentType: "application/json", ...overrides })
    assert.strictEqual(refusal(post({ origin: "http://127.0.0.1:8787" })), "allowed")
    for (const origin of [
      "http://evil.example",
      "null",
      "http://127.0.0.1:9999",
      "https://127.0.0.1:8787",
      "file://"
    ]) {
      assert.strictEqual(refusal(post({ origin })), "Forbidden:foreign-origin", origin)
    }
    const proxied = policyOf({ boundHost: "127.0.0.1", allowedHosts: ["orch.example"], token: undefined })
    assert.strictEqual(refusal(post({ origin: "https://orch.example" }), proxied), "allowed")
    for (const contentType of [
      undefined,
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data",
      "application/jsonx"
    ]) {
      assert.strictEqual(refusal(post({ contentType })), "UnsupportedMediaType", String(contentType))
    }
    assert.strictEqual(refusal(request({ method: "DELETE", route: undefined })), "UnsupportedMediaType")
    // Reads are not state-changing: a foreign page cannot read the answer without CORS anyway.
    assert.strictEqual(refusal(request({ origin: "http://evil.example" })), "allowed")
  })

  it("hostName strips the port and IPv6 brackets and lower-cases", () => {
    assert.strictEqual(hostName("LocalHost:80"), "localhost")
    assert.strictEqual(hostName("[::1]:8787"), "::1")
    assert.strictEqual(hostName("127.0.0.1"), "127.0.0.1")
  })
})
