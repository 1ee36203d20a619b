/**
 * Which tool calls wait for an operator's approval, and for how long: the operator's policy as plain
 * data and pure functions. The decider (Thread.ts) asks `requiresApproval` when it plans a step's
 * calls; a call that needs approval gets no effect row until it is approved. With `mode: "off"` (the
 * default) nothing waits, so a thread behaves exactly as before approvals existed.
 */
import type { Reactor } from "@orchestration/engine"

export interface ApprovalPolicy {
  readonly mode: "off" | "required"
  /**
   * The tools whose calls wait, by the name the model calls (`execute`, `<server>__<tool>`); absent:
   * the default, `execute` and every process-bound MCP tool (the calls that cannot be undone or repeated).
   */
  readonly tools?: ReadonlyArray<string> | undefined
  /** How long a call waits before it is answered "denied: no approval within …". */
  readonly timeoutMs: number
}

export const DEFAULT_TIMEOUT_MS = 24 * 60 * 60 * 1000

export const off: ApprovalPolicy = { mode: "off", timeoutMs: DEFAULT_TIMEOUT_MS }

/** The policy with the default tools: `execute` and process-bound MCP tools. */
export const required = (timeoutMs: number = DEFAULT_TIMEOUT_MS): ApprovalPolicy => ({ mode: "required", timeoutMs })

/** Pure: whether a call of `name` (with the policy its MCP annotations gave, if any) waits for approval. */
export const requiresApproval = (
  policy: ApprovalPolicy,
  call: { readonly name: string; readonly mcpPolicy?: Reactor.ProcessLossPolicy | undefined }
): boolean => {
  if (policy.mode === "off") return false
  if (policy.tools !== undefined) return policy.tools.includes(call.name)
  return call.name === "execute" || call.mcpPolicy === "process-bound"
}

/** A duration as an operator reads it: `24 h`, `90 min`, `30 s`, `1500 ms`. */
export const formatDuration = (ms: number): string => {
  if (ms >= 3_600_000 && ms % 3_600_000 === 0) return `${ms / 3_600_000} h`
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000} min`
  if (ms >= 1_000 && ms % 1_000 === 0) return `${ms / 1_000} s`
  return `${ms} ms`
}

/** `24h`, `90m`, `30s`, `1500ms` or a number of milliseconds; undefined when it is none of these. */
export const parseDuration = (text: string): number | undefined => {
  const match = /^(\d+)\s*(ms|s|m|min|h|d)?$/.exec(text.trim().toLowerCase())
  if (match === null) return undefined
  const value = Number(match[1])
  const unit = match[2] ?? "ms"
  const factor = { ms: 1, s: 1_000, m: 60_000, min: 60_000, h: 3_600_000, d: 86_400_000 }[unit]!
  const ms = value * factor
  return Number.isSafeInteger(ms) ? ms : undefined
}

/** The wait (Waits.ts) a call's approval is, by its thread-unique transcript id. */
export const waitNameOf = (transcriptId: string): string => `approval.${transcriptId}`

/** What a call that was not approved tells the model. */
export const deniedContent = (
  verdict:
    | { readonly kind: "denied"; readonly reason?: string | undefined }
    | {
        readonly kind: "expired"
        readonly timeoutMs: number
      }
): string =>
  verdict.kind === "expired"
    ? `denied: no approval within ${formatDuration(verdict.timeoutMs)}; the call was not performed`
    : `denied by the operator${verdict.reason === undefined || verdict.reason === "" ? "" : `: ${verdict.reason}`}; the call was not performed`
