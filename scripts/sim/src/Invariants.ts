/**
 * The checks a simulation runs against the store after each boot and at quiescence. Each returns the
 * first violation it finds, or undefined. They read only committed data (the log, receipts, outbox,
 * read models) and the simulated world, as an outside observer would.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { ThreadReadModel, Tools } from "@orchestration/agents"
import { Engine, type EventRecord, Outbox } from "@orchestration/engine"
import { Effect } from "effect"
import type { ClientMemory } from "./Client.js"
import type { SimWorldState } from "./SimWorld.js"
import type { Violation } from "./Violation.js"

const processBound = new Set(
  Object.values(Tools.toolPolicies)
    .filter((p) => p.onProcessLoss === "process-bound")
    .map((p) => p.kind as string)
)

/** Pure: a process-bound effect the world saw performed more than once. */
export const performedTwice = (world: SimWorldState): Violation | undefined => {
  const seen = new Map<string, number>()
  for (const p of world.performances) {
    if (!processBound.has(p.kind)) continue
    const n = (seen.get(p.effectId) ?? 0) + 1
    seen.set(p.effectId, n)
    if (n > 1)
      return { invariant: "process-bound-performed-twice", detail: `${p.kind} ${p.effectId} performed ${n} times` }
  }
  return undefined
}

const allEvents = Effect.gen(function* () {
  const engine = yield* Engine.Engine
  const events: Array<EventRecord> = []
  for (;;) {
    const page = yield* engine.readEvents({ after: events.at(-1)?.sequence ?? 0, limit: 1_000 })
    if (page.length === 0) return events
    events.push(...page)
  }
})

const payloadOf = (event: EventRecord): any =>
  typeof event.payload === "string" ? JSON.parse(event.payload) : event.payload

/** Pure: the log is 1..n without a gap; each result and model response recorded once. */
export const checkLog = (events: ReadonlyArray<EventRecord>, memory: ClientMemory): Violation | undefined => {
  for (let i = 0; i < events.length; i++) {
    if (events[i]!.sequence !== i + 1)
      return { invariant: "log-gap", detail: `event ${i + 1} of the log has sequence ${events[i]!.sequence}` }
  }
  const perCommand = new Map<string, number>()
  const results = new Set<string>()
  const steps = new Set<string>()
  for (const event of events) {
    perCommand.set(event.commandId, (perCommand.get(event.commandId) ?? 0) + 1)
    const payload = payloadOf(event)
    const recorded =
      event.type === "tool.result" ? [payload.result] : event.type === "turn.ended" ? (payload.synthetic ?? []) : []
    for (const result of recorded) {
      const key = `${event.aggregateId}/${result.effectId}`
      if (results.has(key))
        return {
          invariant: "result-recorded-twice",
          detail: `${result.effectId} has two results (seq ${event.sequence})`
        }
      results.add(key)
    }
    if (event.type === "model.responded") {
      const key = `${event.aggregateId}/${payload.turnId}#${payload.step}`
      if (steps.has(key))
        return {
          invariant: "result-recorded-twice",
          detail: `model step ${key} recorded twice (seq ${event.sequence})`
        }
      steps.add(key)
    }
  }
  for (const [commandId, ack] of memory.acked) {
    const n = perCommand.get(commandId) ?? 0
    if (n !== ack.events)
      return {
        invariant: "retry-applied-twice",
        detail: `${commandId} was acknowledged with ${ack.events} events; the log holds ${n}`
      }
  }
  return undefined
}

/** Nothing acknowledged is lost; the log has no gap; results once; process-bound effects once. */
export const durable = (memory: ClientMemory, world: SimWorldState) =>
  Effect.gen(function* () {
    const engine = yield* Engine.Engine
    for (const [commandId, ack] of memory.acked) {
      const receipt = yield* engine.receipt(commandId)
      if (receipt._tag === "None")
        return { invariant: "acknowledged-lost", detail: `${commandId} (seq ${ack.sequence}) has no receipt` } as const
      const stored = receipt.value as { readonly sequence?: number }
      if (stored.sequence !== undefined && stored.sequence !== ack.sequence)
        return {
          invariant: "acknowledged-lost",
          detail: `${commandId} acknowledged at seq ${ack.sequence}, receipt says ${stored.sequence}`
        } as const
    }
    const events = yield* allEvents
    return checkLog(events, memory) ?? performedTwice(world)
  })

/** Whether nothing is pending or running and no turn is open. */
export const quiet = Effect.gen(function* () {
  const sql = yield* SqlClient
  const counts = yield* Outbox.countsByStatus
  const [open] = yield* sql<{ n: number }>`
    SELECT COUNT(*) AS n FROM agent_turns WHERE status NOT IN ('completed', 'failed', 'interrupted')`
  return (counts.pending ?? 0) + (counts.running ?? 0) === 0 && Number(open?.n ?? 0) === 0
})

/** What keeps the system from rest, for the failure message. */
export const unrest = Effect.gen(function* () {
  const sql = yield* SqlClient
  const rows = yield* sql<{ effect_id: string; status: string }>`
    SELECT effect_id, status FROM outbox WHERE status IN ('pending', 'running') ORDER BY sequence LIMIT 5`
  const turns = yield* sql<{ turn_id: string; status: string }>`
    SELECT turn_id, status FROM agent_turns WHERE status NOT IN ('completed', 'failed', 'interrupted') LIMIT 5`
  return `outbox ${rows.map((r) => `${r.effect_id}=${r.status}`).join(" ") || "-"}; turns ${turns.map((t) => `${t.turn_id}=${t.status}`).join(" ") || "-"}`
})

/** At quiescence: every transcript valid, and a summary of the final state for the trace. */
export const atQuiescence = Effect.gen(function* () {
  const sql = yield* SqlClient
  const threads = yield* sql<{ thread_id: string }>`SELECT thread_id FROM agent_threads ORDER BY thread_id`
  for (const { thread_id } of threads) {
    const view = yield* ThreadReadModel.transcriptView(thread_id)
    if (view !== undefined && !view.valid)
      return {
        violation: {
          invariant: "transcript-invalid",
          detail: `${thread_id}: ${JSON.stringify(view.problems).slice(0, 300)}`
        } as Violation,
        summary: ""
      }
  }
  const counts = yield* Outbox.countsByStatus
  const turns = yield* sql<{ status: string; n: number }>`
    SELECT status, COUNT(*) AS n FROM agent_turns GROUP BY status ORDER BY status`
  const summary = `outbox ${JSON.stringify(Object.entries(counts).sort())} turns ${turns.map((t) => `${t.status}=${t.n}`).join(",")}`
  return { violation: undefined, summary }
})
