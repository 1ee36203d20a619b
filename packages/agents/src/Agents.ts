/**
 * The agents domain as one value the server (or a test) plugs into the engine: the Thread and
 * Trigger aggregates, their read models, the reactor that performs its effects, and the services its reactor needs (the
 * world directory, a model provider, and the operator's MCP servers).
 */
import { Layer } from "effect"
import type { Aggregate, Projection, Reactor } from "@orchestration/engine"
import type * as AgentReactor from "./AgentReactor.js"
import type { ApprovalPolicy } from "./Approval.js"
import { agentsReactor } from "./AgentReactor.js"
import * as McpServers from "./McpServers.js"
import type { McpConfig } from "./McpTools.js"
import type { ModelProvider } from "./Provider.js"
import type { SandboxConfig } from "./Sandbox.js"
import * as ScriptedProvider from "./ScriptedProvider.js"
import { makeThread } from "./Thread.js"
import { ThreadViews } from "./ThreadReadModel.js"
import { Trigger } from "./Trigger.js"
import { TriggerViews } from "./TriggerReadModel.js"
import * as World from "./World.js"

export interface AgentsOptions {
  /** Model steps per turn before the turn fails. Default 20. */
  readonly stepLimit?: number
  readonly concurrency?: number
  /** Which calls wait for an operator's approval, and how long (Approval.ts). Default: none wait. */
  readonly approval?: ApprovalPolicy
  /** How long a delegate with `await: true` waits when its call names no timeoutSeconds. Default 30 minutes. */
  readonly delegateTimeoutMs?: number
}

/** What the agents reactor needs from its environment. */
export type AgentServices = AgentReactor.AgentServices

export interface AgentsDomain {
  readonly aggregates: ReadonlyArray<Aggregate.AnyAggregate>
  readonly projections: ReadonlyArray<Projection.Projection>
  readonly reactors: ReadonlyArray<Reactor.ReactorDefinition<AgentServices>>
}

export const domain = (options: AgentsOptions = {}): AgentsDomain => ({
  aggregates: [
    makeThread({
      ...(options.stepLimit === undefined ? {} : { stepLimit: options.stepLimit }),
      ...(options.approval === undefined ? {} : { approval: options.approval }),
      ...(options.delegateTimeoutMs === undefined ? {} : { delegateTimeoutMs: options.delegateTimeoutMs })
    }),
    Trigger
  ],
  projections: [ThreadViews, TriggerViews],
  reactors: [agentsReactor(options.concurrency === undefined ? {} : { concurrency: options.concurrency })]
})

/**
 * The services the agents reactor needs: the world directory, a model provider (scripted by
 * default) and the MCP servers of `mcp` (none by default), started here and closed with the layer.
 */
export const services = (options: {
  readonly worldDir: string
  readonly provider?: Layer.Layer<ModelProvider>
  readonly sandbox?: SandboxConfig
  readonly mcp?: McpConfig
  /** Bytes of an MCP tool's answer kept (MCP_RESULT_BYTES); more is cut, saying so. */
  readonly mcpResultBytes?: number
}): Layer.Layer<World.World | ModelProvider | McpServers.McpServers, World.WorldWriteError> =>
  Layer.mergeAll(
    World.layer({ dir: options.worldDir, ...(options.sandbox === undefined ? {} : { sandbox: options.sandbox }) }),
    options.provider ?? ScriptedProvider.layer,
    options.mcp === undefined
      ? McpServers.none
      : McpServers.layer({
          config: options.mcp,
          ...(options.mcpResultBytes === undefined ? {} : { resultBytes: options.mcpResultBytes })
        })
  )
