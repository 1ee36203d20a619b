/**
 * The Thread's approval decisions: which of a step's calls wait for an operator (an open wait with a
 * durable deadline timer each, their effects kept in the event and not written), and what
 * `tool.approve`, `tool.deny` and the deadline's `tool.approval-timeout` decide. The same answer twice
 * changes nothing; the other answer, or any answer after the deadline or the turn's end, is a stored
 * conflict; a denied or expired call is answered as never performed.
 */
import {
  type Aggregate,
  Decision,
  type DecideContext,
  type EffectIntent,
  type Timers,
  Waits
} from "@orchestration/engine"
import { type ApprovalPolicy, deniedContent, requiresApproval, waitNameOf } from "./Approval.js"
import type { McpCallPayload } from "./ToolCallPlanning.js"
import {
  type ActiveTurn,
  approvalOf,
  type ApprovalVerdict,
  type CallRecord,
  type ThreadEvent,
  type ThreadState
} from "./ThreadEvents.js"
import { answerCall } from "./TurnProgress.js"
/**
 * Of a step's planned effects, those the policy lets run now, and for the others an open approval
 * wait each (its deadline a durable timer): their effects are kept in the event, not written.
 */
export const withholdForApproval = (
  state: ThreadState,
  active: ActiveTurn,
  threadId: string,
  effects: ReadonlyArray<EffectIntent>,
  policy: ApprovalPolicy,
  ctx: DecideContext
) => {
  const now: Array<EffectIntent> = []
  const requested: Array<ThreadEvent> = []
  const timers: Array<Timers.TimerIntent> = []
  for (const effect of effects) {
    // Planned by planCalls in this same decision, so of its shape: not read back from a stored row.
    const payload = effect.payload as McpCallPayload
    const transcriptId = active.calls.find((c) => c.effectId === effect.id)?.transcriptId
    if (
      transcriptId === undefined ||
      !requiresApproval(policy, { name: payload.name, mcpPolicy: payload.mcp?.onProcessLoss })
    ) {
      now.push(effect)
      continue
    }
    const deadline = ctx.now + policy.timeoutMs
    const opened = Waits.open(state.waits, {
      name: waitNameOf(transcriptId),
      deadline,
      token: ctx.commandId,
      timeout: { type: "tool.approval-timeout", threadId }
    })
    // Unreachable: a transcript id is never reused in a thread (planCalls), so its wait is never open
    // already. Were it, the call must still not run unasked, so it is not written either way.
    if (Waits.isRejection(opened)) continue
    timers.push(...opened.timers)
    requested.push({
      type: "approval.requested",
      turnId: active.turnId,
      transcriptId,
      effect: { id: effect.id!, kind: effect.kind, payload: effect.payload },
      deadline,
      timeoutMs: policy.timeoutMs,
      token: ctx.commandId
    })
  }
  return { now, requested, timers }
}

const verdictWords: Record<ApprovalVerdict, string> = {
  approved: "approved",
  denied: "denied",
  expired: "expired unanswered",
  cancelled: "cancelled with its turn"
}

/** The call an approval command names, its record, and the turn it waits in; or why there is none. */
const approvalTarget = (state: ThreadState, threadId: string, callId: string) => {
  const record = approvalOf(state, callId)
  if (record === undefined)
    return Decision.reject("approval-unknown", `no call '${callId}' of thread '${threadId}' waits for approval`)
  const active = state.active
  const call = active?.turnId === record.turnId ? active.calls.find((c) => c.transcriptId === callId) : undefined
  return { _tag: "Target" as const, record, active, call }
}

/**
 * An operator's answer. The same answer again is accepted and changes nothing; the other answer, or
 * any answer after the deadline or the turn's end, is a conflict (a stored rejection).
 */
export const decideApproval = (
  state: ThreadState,
  threadId: string,
  answer: { readonly verdict: "approved" | "denied"; readonly callId: string; readonly note: string | undefined },
  stepLimit: number
): Decision<ThreadEvent> | Aggregate.Rejection => {
  const target = approvalTarget(state, threadId, answer.callId)
  if (target._tag === "Rejection") return target
  const { active, call, record } = target
  if (record.verdict === answer.verdict) return Decision.none()
  if (record.verdict !== null) {
    return Decision.reject(
      "approval-conflict",
      `call '${answer.callId}' was ${verdictWords[record.verdict]} already; it cannot be ${answer.verdict} now`
    )
  }
  const closing = Waits.answer(state.waits, waitNameOf(answer.callId))
  if (Waits.isRejection(closing)) return closing
  if (active === null || active === undefined || call === undefined)
    return Decision.reject("approval-conflict", `the turn of call '${answer.callId}' is over`)
  const closed: ThreadEvent = {
    type: "approval.closed",
    turnId: record.turnId,
    transcriptId: answer.callId,
    verdict: answer.verdict,
    note: answer.note ?? null
  }
  if (answer.verdict === "approved") {
    if (record.effect === null)
      return Decision.reject("approval-conflict", `call '${answer.callId}' has no effect to run`)
    // Written as its stored event holds it, never read here: its handler decodes the payload, and one
    // that does not decode is failed unperformed (payload-undecodable), so the call still gets its result.
    return Decision.of<ThreadEvent>({ events: [closed], effects: [record.effect], cancelTimers: closing.cancelTimers })
  }
  const denied = denyCall(
    state,
    active,
    threadId,
    call,
    deniedContent({ kind: "denied", reason: answer.note }),
    stepLimit,
    [closed]
  )
  return { ...denied, cancelTimers: [...(denied.cancelTimers ?? []), ...closing.cancelTimers] }
}

/** The deadline's timer fired: unless an answer landed first, the call is denied for want of one. */
export const decideApprovalTimeout = (
  state: ThreadState,
  threadId: string,
  wait: string,
  token: string,
  ctx: DecideContext,
  stepLimit: number
): Decision<ThreadEvent> | Aggregate.Rejection => {
  // Only the engine's timer sends this (clients may not use the `timer:` prefix): no one forges a deadline.
  if (!ctx.commandId.startsWith("timer:"))
    return Decision.reject("internal-command", "tool.approval-timeout is sent by the engine's timer only")
  const expiring = Waits.timeout(state.waits, wait, token)
  if (Waits.isRejection(expiring)) return expiring
  const callId = wait.slice(waitNameOf("").length)
  const target = approvalTarget(state, threadId, callId)
  if (target._tag === "Rejection") return target
  const { active, call, record } = target
  if (active === null || active === undefined || call === undefined)
    return Decision.reject("wait-closed", `the turn of call '${callId}' is over`)
  return denyCall(
    state,
    active,
    threadId,
    call,
    deniedContent({ kind: "expired", timeoutMs: record.timeoutMs }),
    stepLimit,
    [{ type: "approval.closed", turnId: record.turnId, transcriptId: callId, verdict: "expired", note: null }]
  )
}

/** A call that never ran is answered with why it was denied (by an operator, or for want of an answer). */
const denyCall = (
  state: ThreadState,
  active: ActiveTurn,
  threadId: string,
  call: CallRecord,
  content: string,
  stepLimit: number,
  events: ReadonlyArray<ThreadEvent>
): Decision<ThreadEvent> =>
  answerCall(
    state,
    active,
    threadId,
    call,
    { callId: call.callId, transcriptId: call.transcriptId, effectId: call.effectId, content, outcome: "denied" },
    stepLimit,
    events
  )
