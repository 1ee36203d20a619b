/**
 * Which route a request matches, asked of the router itself: the server's own routes, matched by
 * the same code and configuration, behind handlers that only name their path. Access is decided on
 * that answer, so no spelling of a path (`//v1`, `/V1`, `/%761`) reaches a route the check did not see.
 */
import { HttpRouter, HttpServerRequest } from "@effect/platform"
import { Cause, Effect, Option } from "effect"

class Matched {
  constructor(readonly path: string) {}
}

/** The path template of the route a request would be served by (`/v1/effects/:effectId`), or undefined. */
export type RouteMatcher = (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<string | undefined>

export const make = (routes: Iterable<HttpRouter.Route<unknown, unknown>>): Effect.Effect<RouteMatcher> =>
  Effect.map(
    HttpRouter.toHttpApp(
      HttpRouter.fromIterable(
        [...routes].map((route) => HttpRouter.makeRoute(route.method, route.path, Effect.fail(new Matched(route.path))))
      )
    ),
    (app) => (request) =>
      (app as Effect.Effect<unknown, unknown, HttpServerRequest.HttpServerRequest>).pipe(
        Effect.provideService(HttpServerRequest.HttpServerRequest, request),
        Effect.scoped,
        // Only a handler fails with Matched; any other failure (RouteNotFound) means no route matched.
        // swallow-ok: a defect while matching also means no route is known, and an unknown route is
        // denied (Access is default-deny), so the request is refused rather than let through.
        Effect.matchCause({
          onFailure: (cause) => {
            const failure = Cause.failureOption(cause)
            return Option.isSome(failure) && failure.value instanceof Matched ? failure.value.path : undefined
          },
          onSuccess: () => undefined
        })
      )
  )
