/**
 * Shrinking a failing seed: a reduction of its run (Reduction.ts) that still fails with the same
 * invariant, found by trying. Greedy, in passes: first what the seed adds to any run (refused writes,
 * model outages, crashes), then whole threads, whole messages, single actions and single scripted
 * tool calls, each kept out once the run without it still fails; passes repeat until one keeps
 * nothing more out, or the tries run out. Every try is a full deterministic run, so the result
 * replays exactly from the seed and the reduction (`pnpm sim --seed N --case '<json>'`).
 */
import * as Reduction from "./Reduction.js"
import { defaultCrashWindow, runSeed, type SeedResult, type SimOptions, seedPlans } from "./Simulation.js"

export interface ShrinkResult {
  readonly original: SeedResult
  readonly shrunk: SeedResult
  readonly reduction: Reduction.Reduction
  /** Runs tried, the original's included. */
  readonly tries: number
}

export interface ShrinkOptions extends Omit<SimOptions, "reduction"> {
  /** Runs at most (default 300). */
  readonly maxTries?: number
}

/** One more thing left out of a reduction, or undefined when it is out already. */
type Step = (current: Reduction.Reduction) => Reduction.Reduction | undefined

const dropAll =
  (field: "dropActions" | "dropCalls", keys: ReadonlyArray<string>): Step =>
  (current) => {
    const have = new Set(current[field] ?? [])
    const added = keys.filter((key) => !have.has(key))
    return added.length === 0 ? undefined : { ...current, [field]: [...have, ...added].sort() }
  }

/** The steps of one pass over the seed's plans, coarse to fine. */
const stepsOf = (seed: number, options: ShrinkOptions, crashes: number): ReadonlyArray<Step> => {
  const plans = seedPlans(seed, options.size)
  const steps: Array<Step> = [
    (r) => (r.noFaults ? undefined : { ...r, noFaults: true }),
    (r) => (r.noOutages ? undefined : { ...r, noOutages: true })
  ]
  // No crash at all is tried at every pass: a failure that needed one may not once other parts are out.
  for (let k = 0; k < Math.max(1, crashes); k++)
    steps.push((r) => ((r.maxCrashes ?? Infinity) <= k ? undefined : { ...r, maxCrashes: k }))
  // Sooner crashes, so fewer steps before them: the window halved, then a quarter off.
  if (crashes > 0)
    for (const factor of [0.5, 0.75]) {
      steps.push((r) => {
        if (r.maxCrashes === 0) return undefined
        const narrower = Math.floor((r.crashWindow ?? options.crashWindow ?? defaultCrashWindow) * factor)
        return narrower < 1 ? undefined : { ...r, crashWindow: narrower }
      })
    }
  const keysOf = (threadId: string, indexes: ReadonlyArray<number>) =>
    indexes.map((index) => Reduction.actionKey(threadId, index))
  for (const plan of plans)
    steps.push(
      dropAll(
        "dropActions",
        keysOf(
          plan.threadId,
          plan.actions.map((_, i) => i)
        )
      )
    )
  for (const plan of plans) {
    const byMessage = new Map<string, Array<number>>()
    plan.actions.forEach(({ action }, i) => {
      const message = action.type === "burst" ? `burst:${i}` : action.messageId
      byMessage.set(message, [...(byMessage.get(message) ?? []), i])
    })
    for (const indexes of byMessage.values()) steps.push(dropAll("dropActions", keysOf(plan.threadId, indexes)))
  }
  for (const plan of plans)
    plan.actions.forEach(({ action }, i) => {
      steps.push(dropAll("dropActions", keysOf(plan.threadId, [i])))
      if (action.type === "burst")
        action.sends.forEach((_, k) =>
          steps.push(dropAll("dropActions", [Reduction.burstSendKey(plan.threadId, i, k)]))
        )
    })
  for (const plan of plans) {
    const seen = new Set<string>()
    for (const { action } of plan.actions) {
      if (action.type !== "send" || seen.has(action.messageId)) continue
      seen.add(action.messageId)
      for (const [step, call] of Reduction.callsOf(action.text))
        steps.push(dropAll("dropCalls", [Reduction.callKey(plan.threadId, action.messageId, step, call)]))
    }
  }
  return steps
}

/**
 * The reduction without what changes nothing: the dropped calls of messages it leaves out whole
 * (Reduction.applyTo reads them only for kept messages), and a crash window when no crash may come.
 * The case to replay reads shorter, and replays the same history.
 */
const pruned = (seed: number, options: ShrinkOptions, reduction: Reduction.Reduction): Reduction.Reduction => {
  const dropActions = new Set(reduction.dropActions ?? [])
  const sent = new Set<string>()
  for (const plan of seedPlans(seed, options.size))
    plan.actions.forEach(({ action }, i) => {
      if (
        action.type !== "interrupt" &&
        action.type !== "burst" &&
        !dropActions.has(Reduction.actionKey(plan.threadId, i))
      )
        sent.add(`${plan.threadId}/${action.messageId}`)
    })
  // With no crash allowed, no crash point is drawn: the window is never read.
  const { dropCalls, crashWindow, ...rest } = reduction
  const windowed = crashWindow === undefined || reduction.maxCrashes === 0 ? rest : { ...rest, crashWindow }
  const kept = (dropCalls ?? []).filter((key) => sent.has(key.slice(0, key.lastIndexOf(":"))))
  return kept.length === 0 ? windowed : { ...windowed, dropCalls: kept }
}

/** The shrunk failure of a failing seed, or undefined when the seed does not fail. */
export const shrink = (seed: number, options: ShrinkOptions = {}): ShrinkResult | undefined => {
  const { maxTries = 300, ...sim } = options
  const original = runSeed(seed, sim)
  if (original.failure === undefined) return undefined
  const invariant = original.failure.invariant
  let best = { reduction: Reduction.none, result: original }
  let tries = 1
  for (let progress = true; progress && tries < maxTries; ) {
    progress = false
    for (const step of stepsOf(seed, options, best.result.crashes)) {
      if (tries >= maxTries) break
      const candidate = step(best.reduction)
      if (candidate === undefined) continue
      tries++
      const result = runSeed(seed, { ...sim, reduction: candidate })
      if (result.failure?.invariant === invariant) {
        best = { reduction: candidate, result }
        progress = true
      }
    }
  }
  return { original, shrunk: best.result, reduction: pruned(seed, options, best.reduction), tries }
}
