import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { raw, startServer } from "./fixtures/server.js"

const token = "dashboard-token"

/** A stand-in for apps/dashboard/dist: an index page, one script and one stylesheet. */
const builtDashboard = () => {
  const dir = mkdtempSync(join(tmpdir(), "dashboard-dist-"))
  mkdirSync(join(dir, "assets"))
  writeFileSync(
    join(dir, "index.html"),
    "<!doctype html><title>dash</title><script type=module src=/assets/index-abc123.js></script>"
  )
  writeFileSync(join(dir, "assets", "index-abc123.js"), "console.log('dash')")
  writeFileSync(join(dir, "assets", "index-abc123.css"), "body{}")
  writeFileSync(join(dir, "secret.txt"), "not an asset")
  return dir
}

describe("the dashboard's static shell", () => {
  it.scopedLive("/ serves the built page and /assets/* its files with their content types, without the token", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ env: { DASHBOARD_DIR: builtDashboard(), API_TOKEN: token } })
      const page = yield* raw(url, "/")
      assert.strictEqual(page.status, 200)
      assert.strictEqual(page.headers.get("content-type"), "text/html; charset=utf-8")
      assert.include(page.body, "<title>dash</title>")
      assert.include(page.headers.get("content-security-policy") ?? "", "frame-ancestors 'none'")
      const script = yield* raw(url, "/assets/index-abc123.js")
      assert.strictEqual(script.status, 200)
      assert.strictEqual(script.headers.get("content-type"), "text/javascript; charset=utf-8")
      assert.strictEqual(script.body, "console.log('dash')")
      assert.include(script.headers.get("cache-control") ?? "", "immutable")
      const style = yield* raw(url, "/assets/index-abc123.css")
      assert.strictEqual(style.headers.get("content-type"), "text/css; charset=utf-8")
      // The API behind it still wants the token.
      assert.strictEqual((yield* raw(url, "/v1/threads")).status, 401)
    })
  )

  it.scopedLive("unknown assets, other extensions and paths leaving the assets directory are 404", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ env: { DASHBOARD_DIR: builtDashboard() } })
      assert.strictEqual((yield* raw(url, "/assets/missing-1.js")).status, 404)
      assert.strictEqual((yield* raw(url, "/assets/..%2Fsecret.txt")).status, 404)
      assert.strictEqual((yield* raw(url, "/assets/%2E%2E%2Findex.html")).status, 404)
      assert.strictEqual((yield* raw(url, "/assets/index-abc123.exe")).status, 404)
      assert.strictEqual((yield* raw(url, "/secret.txt")).status, 404)
    })
  )

  it.scopedLive("without a build, / says how to build the dashboard", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ env: { DASHBOARD_DIR: mkdtempSync(join(tmpdir(), "no-dashboard-")) } })
      const page = yield* raw(url, "/")
      assert.strictEqual(page.status, 404)
      assert.include(page.body, "pnpm build:ui")
    })
  )
})
