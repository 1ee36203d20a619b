/**
 * What the running server knows about itself beyond the engine: the domain's reactors (for lag),
 * what boot reconciled, when it started serving, and the signal that ends long-lived responses
 * (event streams) at shutdown so the HTTP server can close.
 */
import { Context, type Deferred } from "effect"
import type { ServerConfig } from "./Config.js"

export interface ServerStateShape {
  readonly config: ServerConfig
  readonly reactors: ReadonlyArray<{ readonly name: string; readonly kinds: ReadonlyArray<string> }>
  readonly reconciled: {
    readonly requeued: number
    readonly failed: number
    readonly alreadySettled: number
    readonly quarantined: number
  }
  /** Epoch ms when boot finished: reclaims after it happened while running, not at boot. */
  readonly bootedAt: number
  /** Completed when shutdown begins. */
  readonly draining: Deferred.Deferred<void>
}

export class ServerState extends Context.Tag("server/ServerState")<ServerState, ServerStateShape>() {}
