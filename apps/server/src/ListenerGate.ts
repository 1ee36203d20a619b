/**
 * No connection is accepted that will not be answered. The port opens before the store is opened,
 * migrated and reconciled (seconds with a large outbox), and Node accepts connections as soon as it
 * listens. So the listener is wrapped the moment it opens: until the server activates, every route
 * answers 503 `Starting` and `/health` answers 503 `{"status":"starting"}`, both with Retry-After, so
 * clients and load balancers see the state instead of a request that hangs. `open` hands requests
 * to the routes once the engine admits commands; when shutdown takes the routes away, requests get
 * 503 `EngineUnavailable` (shutting-down) and `/health` `{"status":"stopping"}` until the listener
 * closes. (Listening only once ready would refuse connections instead, which a load balancer reads
 * as a dead node and a client cannot tell from a wrong port.)
 */
import { type HttpApp, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Context, Effect, Layer, Schema, Scope } from "effect"
import { EngineUnavailable, Starting, Wire } from "./ApiErrors.js"

export interface ListenerGateShape {
  /** From now on requests go to the served routes (call it once the engine is active). */
  readonly open: Effect.Effect<void>
}

export class ListenerGate extends Context.Tag("server/ListenerGate")<ListenerGate, ListenerGateShape>() {}

/** `/health` while the routes are not serving. */
export const GateHealth = Schema.Struct({ status: Schema.Literal("starting", "stopping") })

type Closed = "starting" | "stopping"

/** What a request gets while the routes are not serving: 503 with Retry-After, in the API's error shape. */
export const closedResponse = (phase: Closed, pathname: string): HttpServerResponse.HttpServerResponse => {
  const body =
    pathname === "/health"
      ? Schema.encodeSync(GateHealth)({ status: phase })
      : phase === "starting"
        ? Schema.encodeSync(Wire.Starting)(
            new Starting({
              message: "the server is starting (opening, migrating or reconciling its store); retry shortly"
            })
          )
        : Schema.encodeSync(Wire.EngineUnavailable)(
            new EngineUnavailable({ reason: "shutting-down", message: "the server is shutting down" })
          )
  return HttpServerResponse.unsafeJson(body, { status: 503, headers: { "retry-after": "1" } })
}

/**
 * Over the opened listener: answers every request at once, and gives the server an HttpServer whose
 * `serve` installs the routes behind the gate instead of on the socket.
 */
export const layer: Layer.Layer<HttpServer.HttpServer | ListenerGate, never, HttpServer.HttpServer> =
  Layer.scopedContext(
    Effect.gen(function* () {
      const listener = yield* HttpServer.HttpServer
      let phase: Closed | "open" = "starting"
      let routes: HttpApp.Default<unknown> | undefined
      const gate: HttpApp.Default<unknown> = Effect.suspend(() => {
        if (phase === "open" && routes !== undefined) return routes
        return Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
          closedResponse(
            phase === "stopping" ? "stopping" : "starting",
            new URL(request.url, "http://localhost").pathname
          )
        )
      })
      yield* listener.serve(gate)
      const address = listener.address
      yield* Effect.logInfo("listening; answering 503 Starting until the store is ready").pipe(
        Effect.annotateLogs({
          address: address._tag === "TcpAddress" ? `${address.hostname}:${address.port}` : address.path
        })
      )
      const gated = HttpServer.make({
        address,
        serve: (httpApp, middleware) =>
          Effect.gen(function* () {
            // The routes run with the services they were served with, but each request keeps its own
            // scope (the one the listener opens per request), never the serving layer's.
            const services = Context.omit(Scope.Scope)(yield* Effect.context<never>())
            // The served app's requirements are erased by HttpServer's `serve` signature; `services` holds them.
            routes = Effect.provide(
              middleware === undefined ? httpApp : middleware(httpApp),
              services
            ) as HttpApp.Default<unknown>
            yield* Effect.addFinalizer(() =>
              Effect.sync(() => {
                routes = undefined
                phase = "stopping"
              })
            )
          })
      })
      const open = Effect.sync(() => {
        if (phase === "starting") phase = "open"
      })
      return Context.make(HttpServer.HttpServer, gated).pipe(Context.add(ListenerGate, { open }))
    })
  )
