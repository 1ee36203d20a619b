export * as ApiErrors from "./ApiErrors.js"
export * as Config from "./Config.js"
export * as Health from "./Health.js"
export * as Metrics from "./Metrics.js"
export * as Server from "./Server.js"
export * as ServerDomain from "./ServerDomain.js"
import type { AnyServerDomain } from "./ServerDomain.js"
export type { AnyServerDomain, DomainContext } from "./ServerDomain.js"
export { ServerState } from "./ServerState.js"
export {
  ThreadViews,
  ThreadView,
  ApprovalList,
  PendingApproval,
  TriggerList,
  TriggerSummary,
  TranscriptView,
  type ThreadPage,
  type ThreadSummary,
  type ThreadViewsShape
} from "./ThreadViews.js"
export { ServerApi } from "./http/Api.js"
/** GET /v1/threads/:id/stream: its message shapes (DeltaView, PartialView) and position format. */
export * as ThreadStream from "./ThreadStream.js"
/** The route schemas (HealthReport, EffectView, …), for clients such as apps/cli. */
export * as Api from "./http/Api.js"
/** The domain `main.ts` serves, loaded on demand (it pulls in the agents domain): `orchestrator serve` runs the same server. */
export const loadDomain = (): Promise<AnyServerDomain> => import("./domain.js").then((m) => m.domain)
export * as ServerProcess from "./ServerProcess.js"
/** What every route answers while the server starts or stops (503 Starting / EngineUnavailable), for clients and their tests. */
export * as ListenerGate from "./ListenerGate.js"
