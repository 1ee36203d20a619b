/**
 * The server's HTTP API as the page uses it: the shapes it reads, taken from apps/server's route
 * schemas (`import type`: nothing of the server is bundled), and one `request` that adds the bearer
 * token and turns a 401 into `Unauthorized`, so the page can ask for the token in one place.
 */
import type { Api, ThreadPage, ThreadView } from "@orchestration/server"
import { readToken } from "./token.js"

export type EffectStatus = typeof Api.EffectStatus.Type
export type EffectRow = typeof Api.EffectView.Type
export type OutboxSummary = Api.OutboxSummary
export type { ThreadPage, ThreadSummary } from "@orchestration/server"
export type ToolCall = ThreadView["turns"][number]["toolCalls"][number]

/** `GET /v1/threads/:threadId`; the server types its messages as unknown, the page reads them as chat messages. */
export type ThreadDetail = Omit<ThreadView, "messages"> & { readonly messages: ReadonlyArray<TranscriptMessage> }

/** A transcript message in the OpenAI chat format, as the agents domain writes it. */
export type TranscriptMessage =
  | { readonly role: "user"; readonly content: string }
  | {
      readonly role: "assistant"
      readonly content: string | null
      readonly tool_calls?: ReadonlyArray<{
        readonly id: string
        readonly function: { readonly name: string; readonly arguments: string }
      }>
    }
  | { readonly role: "tool"; readonly tool_call_id: string; readonly content: string }
  | { readonly role: "system"; readonly content: string }

/** The server answered 401 to a request sent with `token` (undefined: sent without one). */
export class Unauthorized extends Error {
  constructor(readonly token: string | undefined) {
    super(token === undefined ? "the server wants an API token" : "the server refused the API token")
  }
}

/** Any other non-2xx answer, with the server's `{ error, message }` body when it sent one. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    message: string
  ) {
    super(message)
  }
}

export const request = async <A>(path: string, init: RequestInit = {}): Promise<A> => {
  const headers = new Headers(init.headers)
  const token = readToken()
  if (token !== undefined) headers.set("authorization", `Bearer ${token}`)
  const response = await fetch(path, { ...init, headers })
  if (response.status === 401) throw new Unauthorized(token)
  const text = await response.text()
  let body: unknown
  try {
    body = text === "" ? undefined : JSON.parse(text)
  } catch {
    // swallow-ok: not JSON; reported below as the status alone
  }
  if (!response.ok) {
    const named = (body ?? {}) as { error?: string; message?: string }
    throw new ApiError(response.status, named.error ?? `HTTP ${response.status}`, named.message ?? text.slice(0, 200))
  }
  return body as A
}

export const getSummary = () => request<OutboxSummary>("/v1/outbox/summary")

/** A component of the server's health (an MCP server, `mcp:<name>`). */
export interface ComponentHealth {
  readonly name: string
  readonly status: "ok" | "degraded"
  readonly message: string
}

/** The components of GET /health; its body is the same when the server answers 503. */
export const getComponents = async (): Promise<ReadonlyArray<ComponentHealth>> => {
  const response = await fetch("/health")
  const body = (await response.json()) as { components?: ReadonlyArray<ComponentHealth> }
  return body.components ?? []
}

export const getThreads = (options: {
  readonly limit: number
  readonly after?: number | undefined
  readonly status?: string | undefined
  readonly order?: "newest" | "oldest" | undefined
}) => {
  const query = new URLSearchParams({ limit: String(options.limit) })
  if (options.after !== undefined) query.set("after", String(options.after))
  if (options.status !== undefined) query.set("status", options.status)
  if (options.order !== undefined) query.set("order", options.order)
  return request<ThreadPage>(`/v1/threads?${query}`)
}

export const getThread = (threadId: string) => request<ThreadDetail>(`/v1/threads/${encodeURIComponent(threadId)}`)

/** One thread's effect rows (GET /v1/effects?aggregateId=), oldest first. */
export const getThreadEffects = (threadId: string) =>
  request<{ effects: ReadonlyArray<EffectRow> }>(
    `/v1/effects?aggregateId=${encodeURIComponent(threadId)}&limit=1000`
  ).then((r) => r.effects)

/** Release a quarantined effect (record its parked settlement now that the cause is fixed). */
export const releaseQuarantined = (effectId: string) =>
  request<{ commandId: string; duplicate: boolean }>(`/v1/effects/${encodeURIComponent(effectId)}/release`, {
    method: "POST"
  })

/** End a quarantined effect as failed with the operator's reason; its aggregate is not told. */
export const failQuarantined = (effectId: string, reason: string) =>
  request<EffectRow>(`/v1/effects/${encodeURIComponent(effectId)}/fail`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ reason })
  })

/** Retry (failed or cancelled) or cancel (pending or running): operator commands with receipts. */
export const operate = (action: "retry" | "cancel", effectId: string) =>
  request<{ commandId: string; duplicate: boolean }>(`/v1/effects/${encodeURIComponent(effectId)}/${action}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}"
  })

export type PendingApproval = import("@orchestration/server").ApprovalList["approvals"][number]

/** Calls awaiting approval (GET /v1/approvals); none when the server's domain has no approvals (404). */
export const getApprovals = () =>
  request<{ approvals: ReadonlyArray<PendingApproval> }>("/v1/approvals?limit=100").then(
    (r) => r.approvals,
    (error: unknown) => {
      if (error instanceof ApiError && error.status === 404) return []
      throw error
    }
  )

/**
 * Approve or deny a waiting call (`tool.approve` / `tool.deny` through POST /v1/commands). The id is
 * new per click: a second click of the same answer is accepted by the thread as the same approval.
 */
export const answerApproval = (
  verdict: "approve" | "deny",
  call: { readonly threadId: string; readonly callId: string },
  text?: string
) =>
  request<{ commandId: string; duplicate: boolean }>("/v1/commands", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      commandId: `dash-${verdict}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`,
      type: verdict === "approve" ? "tool.approve" : "tool.deny",
      threadId: call.threadId,
      callId: call.callId,
      ...(text === undefined || text === "" ? {} : verdict === "approve" ? { note: text } : { reason: text })
    })
  })
