/**
 * What every request passes through, in one place: the bearer token on /v1 routes (or
 * `?access_token=` on the event stream, since a browser's EventSource cannot send headers), and
 * HttpApi's own decode errors reshaped into the `{ error, message, issues }` body, unknown routes as
 * a NotFound body, and a Retry-After header on every 503. It wraps the router, before HttpApi
 * encodes errors; a middleware given to `serve` would run after the response was already sent.
 */
import { HttpApiBuilder, HttpApiError, HttpApp, HttpServerError, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Redacted } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import { InvalidRequest, NotFound, Unauthorized } from "../ApiErrors.js"
import { ServerState } from "../ServerState.js"
import { ServerApi } from "./Api.js"

const digest = (value: string) => createHash("sha256").update(value).digest()

/** Constant-time comparison of a presented token with the configured one. */
export const tokenMatches = (presented: string, expected: string) => timingSafeEqual(digest(presented), digest(expected))

export const presentedToken = (request: HttpServerRequest.HttpServerRequest, url: URL): string | undefined => {
  const header = request.headers["authorization"]
  if (header !== undefined) {
    const match = /^Bearer\s+(.+)$/i.exec(header.trim())
    return match?.[1]
  }
  return url.pathname === "/v1/events/stream" ? (url.searchParams.get("access_token") ?? undefined) : undefined
}

const retryAfter = (_: HttpServerRequest.HttpServerRequest, response: HttpServerResponse.HttpServerResponse) =>
  Effect.succeed(response.status === 503 ? HttpServerResponse.setHeader(response, "retry-after", "1") : response)

export const apiMiddleware = HttpApiBuilder.middleware(
  ServerApi,
  Effect.gen(function* () {
    const { config } = yield* ServerState
    const expected = config.apiToken === undefined ? undefined : Redacted.value(config.apiToken)
    return (app: HttpApp.Default) =>
      Effect.gen(function* () {
        if (expected !== undefined) {
          const request = yield* HttpServerRequest.HttpServerRequest
          const url = new URL(request.url, "http://localhost")
          if (url.pathname.startsWith("/v1/")) {
            const token = presentedToken(request, url)
            if (token === undefined || !tokenMatches(token, expected)) {
              return yield* new Unauthorized({ message: "send Authorization: Bearer <API_TOKEN>" })
            }
          }
        }
        // The app's failures are typed `never` but carry the route's errors at run time.
        return yield* (app as HttpApp.Default<unknown>)
      }).pipe(
        Effect.catchAll((error) =>
          error instanceof HttpServerError.RouteNotFound
            ? Effect.fail(new NotFound({ message: `no route ${error.request.method} ${new URL(error.request.url, "http://localhost").pathname}` }))
            : error instanceof HttpApiError.HttpApiDecodeError
            ? Effect.fail(
              new InvalidRequest({
                message: error.message,
                issues: error.issues.map((issue) => ({ path: issue.path.map(String), message: issue.message }))
              })
            )
            : Effect.fail(error)
        ),
        // Every 503 says when to come back, whichever route or error produced it.
        (handled) => Effect.zipRight(HttpApp.appendPreResponseHandler(retryAfter), handled)
      ) as HttpApp.Default<InvalidRequest | Unauthorized | NotFound>
  })
)
