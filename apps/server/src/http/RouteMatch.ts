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

/**
 * The router's configuration, the server's and the matcher's alike. The router refuses path parameters
 * over 100 characters by default, but ids the engine builds (effect ids derived from 128-character
 * client ids) may be up to 512: an id in a path must reach its handler, which answers 404 or 400
 * itself. Longer than any valid id is still refused. The matcher is built in a request's fiber, which
 * does not see the server's `setRouterConfig`: it was matching with the default and found no route
 * for a 150-character thread id, so a valid `?access_token` was not taken (2026-12-05).
 */
export const routerConfig = { maxParamLength: 1024 } as const

/** The path template of the route a request would be served by (`/v1/effects/:effectId`), or undefined. */
export type RouteMatcher = (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<string | undefined>

export const make = (routes: Iterable<HttpRouter.Route<unknown, unknown>>): Effect.Effect<RouteMatcher> =>
  Effect.map(
    HttpRouter.toHttpApp(
      HttpRouter.fromIterable(
        [...routes].map((route) => HttpRouter.makeRoute(route.method, route.path, Effect.fail(new Matched(route.path))))
      )
    ).pipe(HttpRouter.withRouterConfig(routerConfig)),
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
