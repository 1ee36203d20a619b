/**
 * The thread view's live text: what GET /v1/threads/:id/stream says about each model step's
 * attempts, folded into one list (pure, tested without a browser). A streaming attempt grows with
 * each delta; once its step's answer is recorded it leaves this list (the transcript holds it), while
 * partial text that is not the answer (superseded by a retry, interrupted, failed) stays, marked.
 * Each tool call's arguments grow beside the text, as their `tool-delta`s come.
 */
import type { ThreadStream } from "@orchestration/server"

export type DeltaView = ThreadStream.DeltaView
export type PartialView = ThreadStream.PartialView
export type ToolDeltaView = ThreadStream.ToolDeltaView

/** A tool call's arguments as streamed so far. */
export interface LiveToolCall {
  readonly id: string
  readonly args: string
}

export type LiveStatus = "streaming" | "superseded" | "interrupted" | "failed"

export interface LiveAttempt {
  readonly turnId: string
  readonly step: number
  readonly attempt: number
  readonly text: string
  readonly status: LiveStatus
  readonly reason?: string | undefined
  readonly toolCalls?: ReadonlyArray<LiveToolCall> | undefined
}

/** The partial attempts kept on screen (the newest); a long-lived thread does not grow the page. */
export const keptPartials = 10

export type LiveMessage =
  | { readonly kind: "delta"; readonly data: DeltaView }
  | { readonly kind: "tool-delta"; readonly data: ToolDeltaView }
  | { readonly kind: "superseded" | "interrupted" | "failed"; readonly data: PartialView }
  | { readonly kind: "thread-event"; readonly data: { readonly type: string; readonly payload: unknown } }

const same = (a: { turnId: string; step: number; attempt: number }, b: typeof a) =>
  a.turnId === b.turnId && a.step === b.step && a.attempt === b.attempt

/** Pure: the live attempts after one message of the stream. */
export const applyLive = (attempts: ReadonlyArray<LiveAttempt>, message: LiveMessage): ReadonlyArray<LiveAttempt> => {
  switch (message.kind) {
    case "delta": {
      const d = message.data
      const current = attempts.find((a) => same(a, d))
      if (current === undefined) {
        return [...attempts, { turnId: d.turnId, step: d.step, attempt: d.attempt, text: d.text, status: "streaming" }]
      }
      // Offsets make a repeated delta harmless: only text past what is shown is added.
      const added = d.text.slice(Math.max(0, current.text.length - d.offset))
      return attempts.map((a) => (a === current ? { ...a, text: a.text + added } : a))
    }
    case "tool-delta": {
      const d = message.data
      const current = attempts.find((a) => same(a, d))
      const base: LiveAttempt = current ?? {
        turnId: d.turnId,
        step: d.step,
        attempt: d.attempt,
        text: "",
        status: "streaming"
      }
      const calls = base.toolCalls ?? []
      const call = calls.find((c) => c.id === d.toolCallId)
      // As for text: only arguments past what is shown are added.
      const args = call === undefined ? d.text : call.args + d.text.slice(Math.max(0, call.args.length - d.offset))
      const toolCalls =
        call === undefined
          ? [...calls, { id: d.toolCallId, args }]
          : calls.map((c) => (c === call ? { ...c, args } : c))
      const next = { ...base, toolCalls }
      return current === undefined ? [...attempts, next] : attempts.map((a) => (a === current ? next : a))
    }
    case "superseded":
    case "interrupted":
    case "failed": {
      const p = message.data
      const status = message.kind
      const marked = attempts.map((a) => (same(a, p) ? { ...a, status, reason: p.reason } : a))
      const partials = marked.filter((a) => a.status !== "streaming")
      const drop = new Set(partials.slice(0, Math.max(0, partials.length - keptPartials)))
      return marked.filter((a) => !drop.has(a))
    }
    case "thread-event": {
      // The step's answer is recorded: its streaming attempt is now the transcript's text.
      const { type, payload } = message.data
      const p = (payload ?? {}) as { turnId?: string; step?: number; steps?: number }
      const step = type === "model.responded" ? p.step : type === "turn.completed" ? p.steps : undefined
      if (step === undefined) return attempts
      return attempts.filter((a) => !(a.status === "streaming" && a.turnId === p.turnId && a.step === step))
    }
    default:
      // An event this page does not know (a newer server's) changes nothing on it.
      return attempts
  }
}
