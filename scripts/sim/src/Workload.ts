/**
 * What the clients do, drawn from the seed before the run starts: threads, messages whose scripts
 * decide the model's tool calls, duplicate and conflicting retries, interrupts, and in some seeds a
 * burst: several messages sent at the same instant, so they share one group commit (a refused write
 * then abandons a batch of several commands, each of which must get its own answer).
 */
import type { Rng } from "./Rng.js"

export type Action =
  | { readonly type: "send"; readonly threadId: string; readonly messageId: string; readonly text: string }
  | { readonly type: "duplicate"; readonly threadId: string; readonly messageId: string; readonly text: string }
  | { readonly type: "conflict"; readonly threadId: string; readonly messageId: string; readonly text: string }
  | { readonly type: "interrupt"; readonly threadId: string; readonly messageId: string }
  | { readonly type: "burst"; readonly sends: ReadonlyArray<Send> }

/** A message sent: its command (Client.ts) is `send-<threadId>-<messageId>`. */
export interface Send {
  readonly type: "send"
  readonly threadId: string
  readonly messageId: string
  readonly text: string
}

/** An action that is one command. */
export type Single = Exclude<Action, { readonly type: "burst" }>

export interface ClientPlan {
  readonly threadId: string
  /** Each action with the pause (ms) before it. */
  readonly actions: ReadonlyArray<{ readonly pauseMs: number; readonly action: Action }>
}

export interface WorkloadSize {
  readonly threads: number
  readonly messages: number
}

export const defaultSize: WorkloadSize = { threads: 3, messages: 3 }

const toolCall = (rng: Rng, threadId: string, threads: ReadonlyArray<string>, n: number) => {
  switch (rng.int(5)) {
    case 0:
      return { name: "publish", arguments: { path: `docs/${threadId}-${rng.int(3)}.md`, content: `v${rng.int(2)}` } }
    case 1:
      return { name: "execute", arguments: { command: `make step${n}` } }
    case 2:
      // A valid spec, so the put goes through the engine under the run's faults; yearly, so no tick
      // fires within a simulated run (the sim's clock starts at 2026-01-01).
      return {
        name: "trigger_edit",
        arguments: {
          triggerId: `trg-${rng.int(3)}`,
          spec: { cron: "0 0 1 1 *", threadId: `${threadId}-cron`, text: `every ${rng.int(60)}` }
        }
      }
    case 3:
      return { name: "mcp_call", arguments: { server: "git", tool: "status", arguments: { n } } }
    default: {
      const others = threads.filter((t) => t !== threadId)
      return { name: "delegate", arguments: { threadId: `${rng.pick(others)}-helper`, text: `help ${n}` } }
    }
  }
}

const scriptText = (rng: Rng, threadId: string, threads: ReadonlyArray<string>) => {
  const steps: Array<unknown> = []
  const count = rng.int(4)
  for (let i = 0; i < count; i++) {
    const calls = 1 + rng.int(2)
    steps.push({ toolCalls: Array.from({ length: calls }, (_, k) => toolCall(rng, threadId, threads, i * 2 + k)) })
  }
  steps.push({ text: `finished ${count}` })
  return JSON.stringify({ script: steps })
}

export const generate = (rng: Rng, size: WorkloadSize): ReadonlyArray<ClientPlan> => {
  const threads = Array.from({ length: size.threads }, (_, i) => `th${i}`)
  const plans = threads.map((threadId) => {
    const actions: Array<{ pauseMs: number; action: Action }> = []
    const messages = 1 + rng.int(size.messages)
    for (let m = 0; m < messages; m++) {
      const messageId = `m${m}`
      const text = scriptText(rng, threadId, threads)
      actions.push({ pauseMs: rng.int(20_000), action: { type: "send", threadId, messageId, text } })
      if (rng.chance(0.3))
        actions.push({ pauseMs: rng.int(5_000), action: { type: "duplicate", threadId, messageId, text } })
      if (rng.chance(0.15))
        actions.push({
          pauseMs: rng.int(5_000),
          action: { type: "conflict", threadId, messageId, text: `${text} (edited)` }
        })
      if (rng.chance(0.2))
        actions.push({ pauseMs: rng.int(30_000), action: { type: "interrupt", threadId, messageId } })
    }
    return { threadId, actions }
  })
  // Drawn after every plan, so a seed without a burst keeps the plans (and the history) it had before
  // bursts existed. Plain texts: the model answers each in one step, without tool calls.
  if (!rng.chance(0.5)) return plans
  const host = rng.int(plans.length)
  const sends: Array<Send> = Array.from({ length: 2 + rng.int(4) }, (_, k) => ({
    type: "send",
    threadId: rng.pick(threads),
    messageId: `burst${k}`,
    text: `burst ${k}`
  }))
  const at = rng.int(plans[host]!.actions.length + 1)
  const burst = { pauseMs: rng.int(20_000), action: { type: "burst", sends } as const }
  return plans.map((plan, i) =>
    i === host ? { ...plan, actions: [...plan.actions.slice(0, at), burst, ...plan.actions.slice(at)] } : plan
  )
}
