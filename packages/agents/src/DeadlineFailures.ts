/**
 * A thread's deadline that can never fire. The engine tells the thread (`engine.timer-failed`,
 * TimerFailures.ts) when the timer of a wait's deadline failed for good: the approval deadline of a
 * call (`tool.approval-timeout`) or the deadline of an awaited delegate (`delegate.timeout`). Without
 * this the turn would wait in silence: nothing but the operator's answer, or the other thread's,
 * would ever close its wait.
 *
 * The turn ends failed, the failure recorded with the engine's closed reason (`turn.timer-failed`)
 * and named in the turn's reason. It does not take the deadline's own path instead (the call denied
 * as expired, or answered as timed out): that decision is the one that could not be made. Its stored
 * command was refused (another build's), unreadable, or deciding it threw at every try, and running
 * that same decision here would likely throw again, leaving the thread untold. Ending the turn takes
 * the path every interrupt takes, and shows the user a failed turn that says why. Pure.
 */
import { Decision, type DecideContext, type TimerFailure, Waits } from "@orchestration/engine"
import { waitNameOf as approvalWaitOf } from "./Approval.js"
import { waitNameOf as delegateWaitOf } from "./DelegationEvents.js"
import type { ThreadEvent, ThreadState } from "./ThreadEvents.js"
import { endTurn } from "./TurnProgress.js"

/** The wait of the running turn whose deadline the failed timer was, while that wait is still open. */
const guardedWait = (state: ThreadState, failure: TimerFailure) => {
  const active = state.active
  if (active === null) return undefined
  // The same opening: open, with this deadline (a wait answered, timed out or opened again is not it).
  const isThisOpening = (wait: Waits.Wait | undefined) => wait?.status === "open" && wait.deadline === failure.at
  for (const call of active.calls) {
    if (active.answered.includes(call.transcriptId)) continue
    const approval = approvalWaitOf(call.transcriptId)
    if (failure.timerId === Waits.timerIdOf(approval) && isThisOpening(Waits.get(state.waits, approval))) {
      const what = `the deadline of call '${call.transcriptId}' awaiting approval`
      return { active, call, wait: "approval" as const, what }
    }
    const delegate = delegateWaitOf(call.effectId)
    if (failure.timerId === Waits.timerIdOf(delegate) && isThisOpening(Waits.get(state.delegation.waits, delegate))) {
      const other = state.delegation.awaiting[call.effectId]?.threadId ?? ""
      const what = `the deadline of call '${call.transcriptId}' awaiting thread '${other}'`
      return { active, call, wait: "delegate" as const, what }
    }
  }
  return undefined
}

/**
 * The thread's `onTimerFailed`: the running turn ends failed when the failed timer is the deadline of
 * one of its open waits; any other failure (a deadline whose wait closed first, a turn already over)
 * changes nothing. What delegation adds to a turn's end (a reply owed, the awaited turn withdrawn) is
 * added by the caller, as for every decision of the thread.
 */
export const decideTimerFailure = (
  state: ThreadState,
  failure: TimerFailure,
  ctx: DecideContext
): Decision<ThreadEvent> => {
  const guarded = guardedWait(state, failure)
  if (guarded === undefined) return Decision.none()
  const { active, call, wait, what } = guarded
  const recorded: ThreadEvent = {
    type: "turn.timer-failed",
    turnId: active.turnId,
    wait,
    transcriptId: call.transcriptId,
    timerId: failure.timerId,
    at: failure.at,
    reason: failure.reason,
    message: failure.message
  }
  // The turn's reason names the failure, short (it is the synthetic results' text the model reads);
  // the engine's message, which may quote domain code, stays in the recorded event.
  const reason = `${what} could not fire (${failure.reason})`
  return endTurn(state, active, ctx.aggregateId, "failed", reason, { events: [recorded] })
}
