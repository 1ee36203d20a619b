/**
 * What a domain adds to `/health`: its own components (for the agents domain, each MCP server), each
 * `ok` or `degraded`. A degraded component makes the server degraded, never unavailable: the engine
 * still takes and records work; only what that component offers is missing. Optional: a domain
 * without it adds nothing.
 */
import { Context, type Effect } from "effect"

export interface ComponentHealth {
  readonly name: string
  readonly status: "ok" | "degraded"
  /** A short reason for the operator; details (a server's stderr) go to the log, not to this unauthenticated route. */
  readonly message: string
}

export class DomainHealth extends Context.Tag("server/DomainHealth")<
  DomainHealth,
  { readonly components: Effect.Effect<ReadonlyArray<ComponentHealth>> }
>() {}
