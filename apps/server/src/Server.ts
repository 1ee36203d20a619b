/**
 * The server assembled: listener (answering 503 Starting from the moment it opens) → store → engine
 * (parked) → the domain's services → boot (reconcile, reactors parked) → HTTP routes. `start` builds
 * it in the caller's scope, activates the engine, then opens the gate to the routes, and registers
 * the first step of shutdown (stop admitting, end event streams) so it runs before the listener,
 * reactors and store close. main.ts and the tests both start the server this way.
 */
import { HttpApiBuilder, HttpApiSwagger, HttpRouter, HttpServer } from "@effect/platform"
import * as SqlClient from "@effect/sql/SqlClient"
import {
  Boot,
  Engine,
  FreeSpace,
  PostgresStore,
  SqliteStore,
  type StorageFaults,
  type Worker
} from "@orchestration/engine"
import { Clock, Context, Deferred, Duration, Effect, Layer, Redacted, type Scope } from "effect"
import type { ServerConfig } from "./Config.js"
import * as Metrics from "./Metrics.js"
import { ServerApi } from "./http/Api.js"
import { CommandsLive } from "./http/CommandsHandlers.js"
import * as DashboardAssets from "./http/DashboardAssets.js"
import { apiMiddleware } from "./http/Edge.js"
import { EffectsLive } from "./http/EffectsHandlers.js"
import { EventsLive } from "./http/EventsHandlers.js"
import { OpsLive } from "./http/OpsHandlers.js"
import { OutboxLive } from "./http/OutboxHandlers.js"
import * as RouteMatch from "./http/RouteMatch.js"
import { ThreadsLive } from "./http/ThreadsHandlers.js"
import { TimersLive } from "./http/TimersHandlers.js"
import { type AnyServerDomain, aggregatesOf, type DomainContext } from "./ServerDomain.js"
import * as ListenerGate from "./ListenerGate.js"
import { ServerState, type ServerStateShape } from "./ServerState.js"
import * as StoreWritability from "./StoreWritability.js"

export interface ServerOptions {
  readonly config: ServerConfig
  readonly domain: AnyServerDomain
  readonly env?: Readonly<Record<string, string | undefined>>
  /** Replaces the statfs probe on DATA_DIR (tests move a controllable one across the floor). */
  readonly freeSpace?: Layer.Layer<FreeSpace.FreeSpace>
  /** Makes the store refuse chosen writes (tests of the refused-write path). */
  readonly storageFaults?: Layer.Layer<StorageFaults>
  readonly worker?: Worker.WorkerOptions
}

/** SQLite in DATA_DIR, or the PostgreSQL database of DATABASE_URL shared with other server processes. */
export const storeLayer = (config: ServerConfig) =>
  config.databaseUrl === undefined
    ? SqliteStore.layer({ filename: config.databaseFile })
    : PostgresStore.layer({
        url: Redacted.value(config.databaseUrl),
        schema: config.databaseSchema,
        applicationName: `orchestration-server:${config.nodeId}`
      })

/** Store, engine, domain services, boot and the server's own state: everything but HTTP. */
export const coreLayer = (options: ServerOptions) => {
  const { config, domain } = options
  const context: DomainContext = { config, dataDir: config.dataDir, env: options.env ?? {} }
  const freeSpace =
    options.freeSpace ?? FreeSpace.layer({ directory: config.dataDir, floorBytes: config.diskFloorBytes })
  const engine = Engine.layer({
    aggregates: aggregatesOf(domain, context),
    projections: domain.projections ?? [],
    activation: "manual"
  }).pipe(
    Layer.provideMerge(storeLayer(config)),
    Layer.provideMerge(freeSpace),
    Layer.provide(options.storageFaults ?? Layer.empty)
  )
  const withDomain = domain.layer(context).pipe(Layer.provideMerge(engine))
  // Reactors read the free-space probe from their context: it must be the engine's, not the default.
  const reactors = domain.reactors.map((reactor) => ({
    ...reactor,
    shutdownGrace: Duration.millis(config.shutdownGraceMs)
  }))
  const booted = Boot.layer({
    reactors,
    activation: "manual",
    worker: { nodeId: config.nodeId, ...options.worker }
  }).pipe(Layer.provideMerge(withDomain))
  const withThreads = domain.threads === undefined ? booted : domain.threads(context).pipe(Layer.provideMerge(booted))
  const state = Layer.effect(
    ServerState,
    Effect.gen(function* () {
      const report = yield* Boot.BootReport
      return {
        config,
        reactors: domain.reactors.map((r) => ({ name: r.name, kinds: Object.keys(r.kinds) })),
        reconciled: report.reconciled,
        bootedAt: yield* Clock.currentTimeMillis,
        draining: yield* Deferred.make<void>()
      }
    })
  )
  // The probe writes where commands do, so it meets the same refused writes.
  const writability = StoreWritability.layer({ probeEvery: Duration.millis(config.storageProbeMs) }).pipe(
    Layer.provide(options.storageFaults ?? Layer.empty)
  )
  return Layer.mergeAll(state, Metrics.layer, writability).pipe(Layer.provideMerge(withThreads))
}

const ApiLive = HttpApiBuilder.api(ServerApi).pipe(
  Layer.provide([CommandsLive, EventsLive, ThreadsLive, EffectsLive, OutboxLive, TimersLive, OpsLive]),
  Layer.provide(apiMiddleware)
)

/**
 * The routes, OpenAPI at /openapi.json, the docs UI at /docs and the dashboard at /, served on the
 * given listener.
 */
export const httpLayer = HttpApiBuilder.serve().pipe(
  Layer.provide(HttpApiSwagger.layer({ path: "/docs" })),
  Layer.provide(DashboardAssets.layer),
  Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" })),
  Layer.provide(ApiLive),
  // The same configuration as the access check's route matcher (RouteMatch.routerConfig says why).
  Layer.provide(HttpRouter.setRouterConfig(RouteMatch.routerConfig))
)

/** The listener is gated first, so a request that arrives while the store boots is answered (503). */
export const serverLayer = <E, R>(options: ServerOptions, listener: Layer.Layer<HttpServer.HttpServer, E, R>) =>
  httpLayer.pipe(
    Layer.provideMerge(coreLayer(options)),
    Layer.provideMerge(ListenerGate.layer.pipe(Layer.provide(listener)))
  )

export interface Started {
  readonly url: string
  readonly engine: Engine.EngineShape
  readonly state: ServerStateShape
  /** The store's client (tests fill the store with it). */
  readonly sql: SqlClient.SqlClient
}

/**
 * Builds the server in the current scope, then activates and opens the gate: until then every request
 * is answered 503 Starting, and nothing is admitted before reconcile finished.
 */
export const start = <E, R>(
  options: ServerOptions,
  listener: Layer.Layer<HttpServer.HttpServer, E, R>
): Effect.Effect<Started, unknown, Scope.Scope | R> =>
  Effect.gen(function* () {
    const context = yield* Layer.build(serverLayer(options, listener))
    const engine = Context.get(context, Engine.Engine)
    const state = Context.get(context, ServerState)
    const address = Context.get(context, HttpServer.HttpServer).address
    const url = address._tag === "TcpAddress" ? `http://${address.hostname}:${address.port}` : `unix:${address.path}`
    // Runs first at scope close: refuse clients (503) and end event streams, then the layers
    // close in reverse: listener, reactors (in-flight effects get their grace), engine, store.
    yield* Effect.addFinalizer(() =>
      Effect.logInfo("shutting down: refusing new commands, draining reactors").pipe(
        Effect.zipRight(engine.stopAdmitting),
        Effect.zipRight(Deferred.succeed(state.draining, undefined))
      )
    )
    yield* engine.activate
    yield* Context.get(context, ListenerGate.ListenerGate).open
    return { url, engine, state, sql: Context.get(context, SqlClient.SqlClient) }
  })
