/**
 * What a tool call's failure tells the model, and whether it ends the turn. A failure of the store
 * ends the turn (nothing further can be recorded reliably); a call cut off by the end of its process
 * is "interrupted": it may or may not have taken effect, so the model is told the one thing to check
 * before repeating it; anything else is an error result the model reads and the turn goes on.
 */
import type { EffectOutcome } from "@orchestration/engine"
import type { CallRecord, ResultRecord } from "./ThreadEvents.js"

export interface FailureDescription {
  readonly content: string
  readonly outcome: ResultRecord["outcome"]
  readonly failsTurn: boolean
}

/** What to tell the model about a failed tool, and whether the turn itself must fail. */
export const describeFailure = (outcome: EffectOutcome, call: CallRecord): FailureDescription => {
  const error = outcome.error ?? { message: "failed" }
  const code = error.code ?? ""
  if (code.startsWith("SQLITE_") || error.message.startsWith("storage:") || code === "53100" || code === "ENOSPC") {
    return { content: `error: ${error.message}`, outcome: "storage", failsTurn: true }
  }
  if (
    code === "process-ended" ||
    code === "owner-lost" ||
    (code === "timeout" && error.message.includes("may or may not"))
  ) {
    return {
      content: `interrupted: ${outcome.kind} ${outcome.effectId} may or may not have taken effect${whatIsKnown(call, code)}; verify ${whatToVerify(call)} before repeating it`,
      outcome: "interrupted",
      failsTurn: false
    }
  }
  return { content: `error: ${error.message}`, outcome: "failed", failsTurn: false }
}

/** For a cut-off command: what it was, when it was started, and that its process is gone. */
const whatIsKnown = (call: CallRecord, code: string): string => {
  if (call.name !== "execute" || code !== "process-ended") return ""
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
    case "mcp_call":
      return `whether ${String(args.server ?? "?")}/${String(args.tool ?? "?")} was already called`
    case "publish":
      return `the latest version at ${JSON.stringify(args.path ?? "")}`
    case "trigger_edit":
      return `trigger ${JSON.stringify(args.triggerId ?? "")}`
    default:
      return `the effect of ${call.name}`
  }
}
