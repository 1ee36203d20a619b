/**
 * A reduction of a seed's run: the parts of what the seed drew that the run leaves out. A seed draws
 * its clients' plans before the run starts, and its crashes, refused writes and model outages as it
 * goes; a reduction drops client actions and scripted tool calls from the plans, and caps or turns
 * off the rest. `runSeed(seed, { reduction })` is as deterministic as the seed alone, so a shrunk
 * failure (Shrink.ts) replays exactly from the seed and its reduction.
 */
import type { ClientPlan } from "./Workload.js"

export interface Reduction {
  /**
   * Client actions left out, as `<threadId>:<index>` (the action's place in the seed's plan), and single
   * sends of a burst as `<threadId>:<index>.<send>`.
   */
  readonly dropActions?: ReadonlyArray<string>
  /** Scripted tool calls left out, as `<threadId>/<messageId>:<step>.<call>` (places in the seed's script). */
  readonly dropCalls?: ReadonlyArray<string>
  /** At most this many crashes (the seed's own count when lower). */
  readonly maxCrashes?: number
  /**
   * Scheduler steps within which each crash is drawn, instead of the run's (SimOptions.crashWindow):
   * a narrower window crashes sooner. The draw is the seed's either way.
   */
  readonly crashWindow?: number
  /** No refused writes. */
  readonly noFaults?: true
  /** No model outages. */
  readonly noOutages?: true
}

export const none: Reduction = {}

export const actionKey = (threadId: string, index: number) => `${threadId}:${index}`
export const burstSendKey = (threadId: string, index: number, send: number) => `${threadId}:${index}.${send}`
export const callKey = (threadId: string, messageId: string, step: number, call: number) =>
  `${threadId}/${messageId}:${step}.${call}`

interface ScriptStep {
  readonly toolCalls?: ReadonlyArray<unknown>
}

/** The places of a message's scripted tool calls, as the seed drew them. */
export const callsOf = (text: string): ReadonlyArray<readonly [step: number, call: number]> => {
  const script = (JSON.parse(text) as { readonly script: ReadonlyArray<ScriptStep> }).script
  return script.flatMap((step, s) => (step.toolCalls ?? []).map((_, c) => [s, c] as const))
}

/**
 * A script without the dropped calls; a step left with none is dropped (its model turn would answer
 * nothing), the closing text step stays.
 */
const reducedScript = (text: string, dropped: (step: number, call: number) => boolean): string => {
  const script = (JSON.parse(text) as { readonly script: ReadonlyArray<ScriptStep> }).script
  const kept = script.flatMap((step, s) => {
    if (step.toolCalls === undefined) return [step]
    const calls = step.toolCalls.filter((_, c) => !dropped(s, c))
    return calls.length === 0 ? [] : [{ ...step, toolCalls: calls }]
  })
  return JSON.stringify({ script: kept })
}

/** Pure: the plans a reduction leaves; pauses and the order of what is kept are the seed's. */
export const applyTo = (plans: ReadonlyArray<ClientPlan>, reduction: Reduction): ReadonlyArray<ClientPlan> => {
  const dropActions = new Set(reduction.dropActions ?? [])
  const dropCalls = new Set(reduction.dropCalls ?? [])
  if (dropActions.size === 0 && dropCalls.size === 0) return plans
  return plans.map((plan) => {
    // A duplicate or a conflict retries its send: without the send it would be a first send, and the
    // client (Client.ts) would judge its acceptance as a retry applied twice. It goes with its send.
    const unsent = new Set(
      plan.actions.flatMap(({ action }, index) =>
        action.type === "send" && dropActions.has(actionKey(plan.threadId, index)) ? [action.messageId] : []
      )
    )
    return {
      threadId: plan.threadId,
      actions: plan.actions.flatMap((step, index) => {
        if (dropActions.has(actionKey(plan.threadId, index))) return []
        const action = step.action
        if (action.type === "burst") {
          const sends = action.sends.filter((_, k) => !dropActions.has(burstSendKey(plan.threadId, index, k)))
          return sends.length === 0 ? [] : [{ pauseMs: step.pauseMs, action: { ...action, sends } }]
        }
        if ((action.type === "duplicate" || action.type === "conflict") && unsent.has(action.messageId)) return []
        if (action.type === "interrupt" || dropCalls.size === 0) return [step]
        // A send and its duplicate carry one text; a conflict carries it edited (Workload.generate).
        const edited = action.type === "conflict"
        const seedText = edited ? action.text.slice(0, -" (edited)".length) : action.text
        const text = reducedScript(seedText, (s, c) => dropCalls.has(callKey(plan.threadId, action.messageId, s, c)))
        return [{ pauseMs: step.pauseMs, action: { ...action, text: edited ? `${text} (edited)` : text } }]
      })
    }
  })
}

/** How much a reduction leaves out, for the report. */
export const describe = (reduction: Reduction): string =>
  [
    `${reduction.dropActions?.length ?? 0} actions dropped`,
    `${reduction.dropCalls?.length ?? 0} tool calls dropped`,
    reduction.maxCrashes === undefined ? undefined : `at most ${reduction.maxCrashes} crashes`,
    reduction.crashWindow === undefined ? undefined : `crashes within ${reduction.crashWindow} steps`,
    reduction.noFaults ? "no refused writes" : undefined,
    reduction.noOutages ? "no model outages" : undefined
  ]
    .filter((part) => part !== undefined)
    .join(", ")
