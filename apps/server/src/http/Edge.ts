/**
 * What every request passes through, in one place: access (Access.decideAccess, on the route the
 * router matches: Host, token, Origin, content type), a path that is not valid percent-encoding as
 * a 400, HttpApi's own decode errors reshaped into the `{ error, message, issues }` body naming the
 * parameter, unknown routes as a NotFound body, every echoed client value clipped (ClientValue),
 * and a Retry-After header on every 503. It wraps the router, before HttpApi encodes errors; a
 * middleware given to `serve` would run after the response was already sent.
 */
import {
  HttpApiBuilder,
  HttpApiError,
  HttpApp,
  HttpServerError,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { Cause, Effect, Layer, Redacted } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import { InternalError, InvalidRequest, NotFound } from "../ApiErrors.js"
import { clip, clipAll } from "../ClientValue.js"
import { ServerState } from "../ServerState.js"
import { decideAccess, policyOf, tokenInQueryRoutes } from "./Access.js"
import { ServerApi } from "./Api.js"
import * as RouteMatch from "./RouteMatch.js"

const digest = (value: string) => createHash("sha256").update(value).digest()

/** Constant-time comparison of a presented token with the configured one. */
export const tokenMatches = (presented: string, expected: string) =>
  timingSafeEqual(digest(presented), digest(expected))

/** The bearer token, or `?access_token=` on the one route that takes it there. */
export const presentedToken = (
  request: HttpServerRequest.HttpServerRequest,
  url: URL,
  route: string | undefined
): string | undefined => {
  const header = request.headers.authorization
  if (header !== undefined) {
    const match = /^Bearer\s+(.+)$/i.exec(header.trim())
    return match?.[1]
  }
  return route !== undefined && tokenInQueryRoutes.has(route)
    ? (url.searchParams.get("access_token") ?? undefined)
    : undefined
}

/**
 * Every 503 says when to come back, whichever route or error produced it. A 413 keeps the connection:
 * the rest of the refused body is read and thrown away (RequestBody.readUpTo, or Node for a declared
 * length), since a client still writing it got EPIPE when the answer closed the connection.
 */
const retryAfter = (_: HttpServerRequest.HttpServerRequest, response: HttpServerResponse.HttpServerResponse) =>
  Effect.succeed(response.status === 503 ? HttpServerResponse.setHeader(response, "retry-after", "1") : response)

/** A defect's printed cause, bounded for the log (its stack matters, a client's value in it does not). */
const clipCause = (text: string) =>
  text.length <= 4_000 ? text : `${text.slice(0, 4_000)}…(${text.length} characters)`

const pathOf = (request: HttpServerRequest.HttpServerRequest) => new URL(request.url, "http://localhost").pathname

const isPercentEncoded = (path: string) => {
  try {
    decodeURIComponent(path)
    return true
  } catch {
    return false
  }
}

/** `limit must be a whole number from 1 to 1000, got 'abc'`: which parameter, and what it may be. */
const decodeFailure = (error: HttpApiError.HttpApiDecodeError) => {
  const issues = error.issues.map((issue) => ({ path: issue.path.map(String), message: issue.message }))
  const named = issues.map((issue) =>
    issue.path.length === 0 ? issue.message : `parameter '${issue.path.join(".")}' ${issue.message}`
  )
  return new InvalidRequest({ message: [...new Set(named)].join("; ") || "the request is malformed", issues })
}

export const apiMiddleware = HttpApiBuilder.middleware(
  ServerApi,
  Effect.gen(function* () {
    const { config } = yield* ServerState
    const router = yield* HttpApiBuilder.Router
    const policy = policyOf({
      boundHost: config.host,
      allowedHosts: config.allowedHosts,
      token: config.apiToken === undefined ? undefined : Redacted.value(config.apiToken)
    })
    // Built at the first request, when every layer has added its routes.
    let matcher: RouteMatch.RouteMatcher | undefined
    const routeOf = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function* () {
        if (matcher === undefined) matcher = yield* RouteMatch.make((yield* router.router).routes)
        return yield* matcher(request)
      })
    return (app: HttpApp.Default) =>
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        const url = new URL(request.url, "http://localhost")
        if (!isPercentEncoded(url.pathname)) {
          return yield* new InvalidRequest({
            message: "the path is not valid percent-encoding",
            issues: [{ path: ["path"], message: "malformed %-escape" }]
          })
        }
        const route = yield* routeOf(request)
        const refusal = decideAccess(
          {
            method: request.method,
            route,
            host: request.headers.host,
            origin: request.headers.origin,
            contentType: request.headers["content-type"],
            token: presentedToken(request, url, route)
          },
          policy,
          tokenMatches
        )
        if (refusal !== undefined) return yield* refusal
        // The app's failures are typed `never` but carry the route's errors at run time.
        return yield* app as HttpApp.Default<unknown>
      }).pipe(
        Effect.catchAll((error) =>
          error instanceof HttpServerError.RouteNotFound
            ? Effect.fail(new NotFound({ message: `no route ${error.request.method} ${clip(pathOf(error.request))}` }))
            : error instanceof HttpApiError.HttpApiDecodeError
              ? Effect.fail(clipAll(decodeFailure(error)))
              : Effect.fail(clipAll(error))
        ),
        // A defect (a bug of ours, not a refusal) is a typed 500 with its cause logged, bounded: the
        // cause may hold what the client sent. Without this the client got an empty 500.
        Effect.catchAllDefect((defect) =>
          Effect.logError("a request failed by a defect of the server", {
            cause: clipCause(Cause.pretty(Cause.die(defect)))
          }).pipe(
            Effect.zipRight(
              Effect.fail(new InternalError({ message: "the server failed on this request; the cause is in its log" }))
            )
          )
        ),
        (handled) => Effect.zipRight(HttpApp.appendPreResponseHandler(retryAfter), handled)
      ) as HttpApp.Default<never>
  })
).pipe(Layer.provide(HttpApiBuilder.Router.Live))
