/**
 * What a tool call's failure tells the model, and whether it ends the turn. A failure of the store
 * ends the turn (nothing further can be recorded reliably); a call cut off by the end of its process
 * is "interrupted": it may or may not have taken effect, so the model is told the one thing to check
 * before repeating it; anything else is an error result the model reads and the turn goes on.
 */
import { type EffectError, type EffectOutcome, Reactor } from "@orchestration/engine"
import { absurd } from "effect/Function"
import { parseOfferedName } from "./McpTools.js"
import type { CallRecord, ResultRecord } from "./ThreadEvents.js"
import { type EffectKind, toolPolicies } from "./Tools.js"

export interface FailureDescription {
  readonly content: string
  readonly outcome: ResultRecord["outcome"]
  readonly failsTurn: boolean
}

/**
 * What to tell the model about a failed tool, and whether the turn itself must fail. Matched on the
 * engine's closed failure reason, every reason named: a new one fails to compile here.
 */
export const describeFailure = (outcome: EffectOutcome, call: CallRecord): FailureDescription => {
  const error: EffectError = outcome.error ?? { message: "failed", reason: "handler" }
  const failed: FailureDescription = { content: `error: ${error.message}`, outcome: "failed", failsTurn: false }
  const reason = error.reason
  switch (reason) {
    case "storage":
      return { content: `error: ${error.message}`, outcome: "storage", failsTurn: true }
    case "process-lost":
      return interrupted(outcome, call)
    case "timeout":
      // A process-bound kind is not retried after a timeout: it was cut off and may have taken effect.
      // A replay-safe kind was retried until its budget ran out: it failed.
      return isProcessBound(outcome) ? interrupted(outcome, call) : failed
    case "handler":
      // An MCP server that exited mid-call, or a process-bound MCP call past its own deadline: the
      // call may or may not have taken effect.
      return error.code === "server-exited" || (error.code === "timeout" && isProcessBound(outcome))
        ? interrupted(outcome, call)
        : failed
    case "defect":
    case "cancelled":
    case "operator":
      return failed
    default:
      return absurd(reason)
  }
}

const isProcessBound = (outcome: EffectOutcome) =>
  Reactor.processLossOf(toolPolicies[outcome.kind as EffectKind]?.onProcessLoss, outcome.payload) === "process-bound"

const interrupted = (outcome: EffectOutcome, call: CallRecord): FailureDescription => ({
  content: `interrupted: ${outcome.kind} ${outcome.effectId} may or may not have taken effect${whatIsKnown(call, outcome)}; verify ${whatToVerify(call)} before repeating it`,
  outcome: "interrupted",
  failsTurn: false
})

/** For a command cut off by the end of the server (boot reconcile): what it was and when it was asked for. */
const whatIsKnown = (call: CallRecord, outcome: EffectOutcome): string => {
  if (call.name !== "execute" || outcome.by !== "reconcile") return ""
  const command = JSON.stringify((call.arguments as { command?: unknown } | undefined)?.command ?? "")
  const requested = call.at === undefined ? "" : ` requested at ${new Date(call.at).toISOString()}`
  // The decider cannot know whether the process had started; the ledger line (ledger.jsonl) says when.
  return ` (the command ${command}${requested} may have started; any process of it died with the server, so it may have partly run)`
}

/** The one thing the model should check before repeating a cut-off call. */
const whatToVerify = (call: CallRecord): string => {
  const args = (call.arguments ?? {}) as Record<string, unknown>
  switch (call.name) {
    case "execute":
      return `whether the command ${JSON.stringify(args.command ?? "")} already ran`
    case "publish":
      return `the latest version at ${JSON.stringify(args.path ?? "")}`
    case "trigger_edit":
      return `trigger ${JSON.stringify(args.triggerId ?? "")}`
    default: {
      const mcp = parseOfferedName(call.name)
      return mcp === undefined
        ? `the effect of ${call.name}`
        : `whether the call of ${mcp.tool} on MCP server ${mcp.server} already took effect`
    }
  }
}
