/**
 * The agents domain as the server serves it (the main job): threads and turns from packages/agents,
 * the agents reactor, the world directory under DATA_DIR (or WORLD_DIR), the scripted provider by
 * default or the OpenAI-compatible adapter with PROVIDER=openai, and the thread views (list, thread, transcript)
 * and the trigger list.
 */
import {
  Agents,
  McpServers,
  type ModelProvider,
  OpenAiProvider,
  Sandbox,
  ScriptedProvider,
  ThreadReadModel,
  TriggerReadModel
} from "@orchestration/agents"
import { StorageErrors } from "@orchestration/engine"
import type { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Layer, Option } from "effect"
import * as AgentsStreamSteps from "./AgentsStreamSteps.js"
import { type ComponentHealth, DomainHealth } from "./DomainHealth.js"
import * as ServerDomain from "./ServerDomain.js"
import { type ApprovalListRequest, type ThreadListRequest, ThreadViews } from "./ThreadViews.js"

const agents = Agents.domain()

/**
 * Said once at boot: a sandbox that cannot run does not stop the server (each `execute` is refused
 * with the reason), and running commands on the host is never silent.
 */
const sandboxNotice = (sandbox: Sandbox.SandboxConfig) =>
  Layer.effectDiscard(
    Effect.suspend(() => {
      const refusal = Sandbox.unavailable(sandbox)
      if (refusal !== undefined) return Effect.logWarning(`execute is refused: ${refusal.message}`)
      if (sandbox.mode === "none")
        return Effect.logWarning(
          "SANDBOX=none: execute runs commands on the host, unsandboxed (unsafe, for development only)"
        )
      return Effect.void
    })
  )

/** Each configured MCP server is a component of the server's health: one that is not up degrades it. */
export const mcpHealth = (status: McpServers.McpServerStatus): ComponentHealth => ({
  name: `mcp:${status.name}`,
  status: status.state === "ready" ? "ok" : "degraded",
  message:
    status.state === "ready"
      ? `ready, ${status.tools} tools${status.message === null ? "" : `; ${status.message}`}`
      : `${status.state}${status.message === null ? "" : `: ${status.message}`}`
})

const mcpHealthLayer = Layer.effect(
  DomainHealth,
  Effect.map(McpServers.McpServers, (servers) => ({
    components: Effect.map(servers.statuses, (statuses) => statuses.map(mcpHealth))
  }))
)

const isoOrNull = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

const threadViews = Layer.effect(
  ThreadViews,
  Effect.gen(function* () {
    const context = yield* Effect.context<SqlClient>()
    return {
      streamRules: AgentsStreamSteps.rules,
      listThreads: (request: ThreadListRequest) =>
        Effect.all({ page: ThreadReadModel.listThreads(request), counts: ThreadReadModel.threadCountsByStatus }).pipe(
          Effect.map(({ counts, page }) => ({ threads: page.threads, next: page.next ?? null, counts })),
          Effect.mapError(StorageErrors.toStorageFailure("list threads")),
          Effect.provide(context)
        ),
      getThread: (threadId: string) =>
        ThreadReadModel.threadView(threadId).pipe(
          Effect.map((view) => Option.fromNullable(view).pipe(Option.map((v) => ({ ...v, title: v.title ?? "" })))),
          Effect.mapError(StorageErrors.toStorageFailure("read thread")),
          Effect.provide(context)
        ),
      listTriggers: (request: { readonly limit: number }) =>
        TriggerReadModel.listTriggers(request).pipe(
          Effect.map((triggers) => ({
            triggers: triggers.map((t) => ({
              ...t,
              nextFireAt: isoOrNull(t.nextFireAt),
              lastFiredAt: isoOrNull(t.lastFiredAt)
            }))
          })),
          Effect.mapError(StorageErrors.toStorageFailure("list triggers")),
          Effect.provide(context)
        ),
      listApprovals: (request: ApprovalListRequest) =>
        ThreadReadModel.pendingApprovals(request).pipe(
          Effect.map((approvals) => ({ approvals })),
          Effect.mapError(StorageErrors.toStorageFailure("list approvals")),
          Effect.provide(context)
        ),
      getTranscript: (threadId: string) =>
        ThreadReadModel.transcriptView(threadId).pipe(
          Effect.map(Option.fromNullable),
          Effect.mapError(StorageErrors.toStorageFailure("read transcript")),
          Effect.provide(context)
        )
    }
  })
)

/**
 * The agents domain; `provider` replaces the one the configuration names (tests hold a model step
 * open with it).
 */
export const make = (
  options: { readonly provider?: Layer.Layer<ModelProvider> } = {}
): ServerDomain.ServerDomain<Agents.AgentServices> =>
  ServerDomain.make<Agents.AgentServices>({
    name: "agents",
    // The approval policy (APPROVAL, APPROVAL_TIMEOUT, APPROVAL_TOOLS) and the awaited delegate's default
    // deadline (DELEGATE_TIMEOUT) are the operator's: the decider reads them.
    aggregates: ({ config }) =>
      Agents.domain({ approval: config.approval, delegateTimeoutMs: config.delegateTimeoutMs }).aggregates,
    projections: agents.projections,
    reactors: agents.reactors,
    // The reactor also dispatches (delegates), streams and reads the transcript: pass the engine's services through.
    layer: ({ config }) =>
      Layer.mergeAll(
        Layer.context<ServerDomain.EngineServices>(),
        sandboxNotice(config.sandbox),
        Layer.provideMerge(
          mcpHealthLayer,
          Agents.services({
            worldDir: config.worldDir,
            sandbox: config.sandbox,
            mcp: config.mcp,
            mcpResultBytes: config.mcpResultBytes,
            provider:
              options.provider ??
              (config.provider === "openai"
                ? OpenAiProvider.layer({
                    apiUrl: config.openaiBaseUrl,
                    ...(config.openaiApiKey !== undefined ? { apiKey: config.openaiApiKey } : {}),
                    model: config.openaiModel
                  })
                : ScriptedProvider.layer)
          })
        )
      ),
    exampleCommand: { type: "message.send", threadId: "hello", messageId: "m1", text: "hi there" },
    threads: () => threadViews
  })

export const domain: ServerDomain.ServerDomain<Agents.AgentServices> = make()
