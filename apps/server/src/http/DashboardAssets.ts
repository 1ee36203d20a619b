/**
 * The dashboard's static shell (apps/dashboard's build) at `/` and `/assets/*`: outside /v1 and
 * without the token, since the page itself asks for the token and sends it on its API calls.
 * Files are read per request from one directory, and only names matching a strict pattern are
 * looked up, so nothing outside that directory can be reached.
 */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { existsSync } from "node:fs"
import { readFile } from "node:fs/promises"
import { extname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { clip } from "../ClientValue.js"
import { ServerState } from "../ServerState.js"

export const contentTypes: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".map": "application/json",
  ".woff2": "font/woff2"
}

/** One file name under /assets: what the bundler emits (name-hash.ext), nothing with a slash or `..`. */
const assetName = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,200}$/

/**
 * apps/dashboard/dist seen from this module, compiled (apps/server/dist/src/http) or run from
 * source by the tests (apps/server/src/http).
 */
const defaultDirs = ["../../../../dashboard/dist", "../../../dashboard/dist"].map((relative) =>
  fileURLToPath(new URL(relative, import.meta.url))
)

export const dashboardDir = (configured: string | undefined): string =>
  configured ?? defaultDirs.find((dir) => existsSync(join(dir, "index.html"))) ?? defaultDirs[0]!

const securityHeaders = {
  "x-content-type-options": "nosniff",
  // The page talks only to this server; nothing may frame it (its buttons are operator commands).
  "content-security-policy":
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'"
}

const notBuilt = (dir: string) =>
  HttpServerResponse.text(
    `The dashboard is not built (no ${join(dir, "index.html")}). Run \`pnpm build:ui\` at the repository root, or set DASHBOARD_DIR.\n`,
    { status: 404, contentType: "text/plain; charset=utf-8" }
  )

/** Reads one file of the build; undefined when it is not there. */
const readBuilt = (path: string) =>
  Effect.tryPromise(() => readFile(path)).pipe(
    // swallow-ok: a missing or unreadable file of a read-only static route is answered 404, not an error.
    Effect.orElseSucceed(() => undefined)
  )

export const layer = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function* () {
    const { config } = yield* ServerState
    const dir = dashboardDir(config.dashboardDir)
    const index = Effect.gen(function* () {
      const body = yield* readBuilt(join(dir, "index.html"))
      if (body === undefined) return notBuilt(dir)
      return HttpServerResponse.uint8Array(body, {
        contentType: contentTypes[".html"]!,
        headers: { ...securityHeaders, "cache-control": "no-cache" }
      })
    })
    yield* router.get("/", index)
    yield* router.get("/index.html", index)
    yield* router.get(
      "/assets/*",
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        const name = decodeURIComponent(new URL(request.url, "http://localhost").pathname.slice("/assets/".length))
        const type = contentTypes[extname(name)]
        const body =
          assetName.test(name) && type !== undefined ? yield* readBuilt(join(dir, "assets", name)) : undefined
        if (body === undefined) return HttpServerResponse.text(`no asset '${clip(name)}'\n`, { status: 404 })
        // Bundled names carry a content hash: a name never changes content.
        return HttpServerResponse.uint8Array(body, {
          contentType: type!,
          headers: { ...securityHeaders, "cache-control": "public, max-age=31536000, immutable" }
        })
      }).pipe(Effect.catchAllDefect(() => Effect.succeed(HttpServerResponse.text("bad asset path\n", { status: 400 }))))
    )
  })
)
