/**
 * Cron triggers under chaos: a few `* * * * *` triggers put before the kills, each sending a scripted
 * one-step turn to its own thread every minute. Afterwards, from the log and the receipts: every tick
 * fired once (one `trigger.fired` per tick time, one receipt `trigger:<id>:<tick ISO time>`, one message
 * in the thread), and every minute from the first scheduled tick to the last expected one fired.
 */
import { Either } from "effect"
import * as Api from "./Api.js"
import type { Command } from "./Client.js"

const MINUTE = 60_000

export const triggerIds = (count: number) => Array.from({ length: count }, (_, i) => `chaos-tick-${i}`)

/** Each trigger's thread (the trigger's own, so a tick's turn never queues behind the workload). */
export const threadOf = (triggerId: string) => `${triggerId}-thread`

export const put = (triggerId: string): Command => ({
  commandId: `chaos-put-${triggerId}`,
  type: "trigger.put",
  triggerId,
  cron: "* * * * *",
  threadId: threadOf(triggerId),
  text: JSON.stringify({ script: [{ text: `tick of ${triggerId}` }] })
})

export const remove = (triggerId: string): Command => ({
  commandId: `chaos-delete-${triggerId}`,
  type: "trigger.delete",
  triggerId
})

/** The command id of a tick's message (Trigger.tickId, for ids this short). */
export const tickId = (triggerId: string, at: number) => `trigger:${triggerId}:${new Date(at).toISOString()}`

/** The first tick each trigger was put with (its `trigger.put` event's nextAt). */
export const firstTicks = (events: ReadonlyArray<Api.EventView>) => {
  const first = new Map<string, number>()
  for (const event of events) {
    if (event.aggregateType !== "trigger" || event.type !== "trigger.put") continue
    const nextAt = (event.payload as { nextAt?: unknown }).nextAt
    if (typeof nextAt === "number" && !first.has(event.aggregateId)) first.set(event.aggregateId, nextAt)
  }
  return first
}

/** The last minute boundary at or before `now`. */
export const minuteFloor = (now: number) => Math.floor(now / MINUTE) * MINUTE

/**
 * Waits (bounded) until every trigger's schedule has moved past `lastExpected`: its tick at that time
 * has fired, or, failing that, the count below reports it missing.
 */
export const awaitTicks = async (base: string, ids: ReadonlyArray<string>, lastExpected: number, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const listed = await Api.triggers(base).catch(() => undefined) // swallow-ok: a refused read is polled again
    const past = (id: string) => {
      const next = listed?.find((t) => t.triggerId === id)?.nextFireAt
      return next !== undefined && next !== null && Date.parse(next) > lastExpected
    }
    if (listed !== undefined && ids.every(past) && Date.now() > lastExpected) return true
    await new Promise((r) => setTimeout(r, 250))
  }
  return false
}

export interface TickReport {
  /** Distinct tick times fired, over all triggers. */
  ticks: number
  /** Tick times fired, or messaged, more than once (each repeat counts). */
  duplicates: number
  /** Minutes up to the last expected tick with no fire, or a fire with no receipt or no message. */
  missed: number
  /** Ticks decided before the last kill's restart: the ones that fell among the kills. */
  amidKills: number
  details: Array<string>
}

/** Counts every trigger's ticks from the log and the receipts; `lastExpected` is the last tick that must have fired. */
export const countTicks = async (
  base: string,
  events: ReadonlyArray<Api.EventView>,
  ids: ReadonlyArray<string>,
  lastExpected: number,
  killsEndedAt: number
): Promise<TickReport> => {
  const report: TickReport = { ticks: 0, duplicates: 0, missed: 0, amidKills: 0, details: [] }
  const first = firstTicks(events)
  for (const id of ids) {
    const fired = new Map<number, number>()
    /** When each tick was decided: a fire later than the next minute skips it (by design, as after downtime). */
    const firedAt = new Map<number, number>()
    for (const event of events) {
      if (event.aggregateType !== "trigger" || event.aggregateId !== id || event.type !== "trigger.fired") continue
      const payload = event.payload as { at?: unknown; firedAt?: unknown }
      const at = Number(payload.at)
      fired.set(at, (fired.get(at) ?? 0) + 1)
      firedAt.set(at, Number(payload.firedAt))
    }
    // The tick's message.send: a turn started or a message queued in the thread, under the tick's command id.
    const messages = new Map<string, number>()
    for (const event of events) {
      if (event.aggregateId !== threadOf(id) || !event.commandId.startsWith(`trigger:${id}:`)) continue
      if (event.type !== "turn.started" && event.type !== "message.queued") continue
      messages.set(event.commandId, (messages.get(event.commandId) ?? 0) + 1)
    }
    for (const [commandId, count] of messages) {
      if (count > 1) {
        report.duplicates += count - 1
        report.details.push(`${commandId} reached ${threadOf(id)} ${count} times`)
      }
    }
    for (const [at, count] of fired) {
      report.ticks++
      if (firedAt.get(at)! <= killsEndedAt) report.amidKills++
      const iso = new Date(at).toISOString()
      if (count > 1) {
        report.duplicates += count - 1
        report.details.push(`trigger ${id} fired its tick at ${iso} ${count} times`)
      }
      const receipt = await Api.receipt(base, tickId(id, at))
      if (Either.isLeft(receipt) || receipt.right.status !== "accepted") {
        report.missed++
        report.details.push(`trigger ${id}: the tick at ${iso} has no accepted message receipt`)
      } else if (!messages.has(tickId(id, at))) {
        report.missed++
        report.details.push(`trigger ${id}: the tick at ${iso} left no message in ${threadOf(id)}`)
      }
    }
    const start = first.get(id)
    if (start === undefined) {
      report.missed++
      report.details.push(`trigger ${id} was never put`)
      continue
    }
    for (let at = start; at <= lastExpected; at += MINUTE) {
      if (!fired.has(at)) {
        report.missed++
        const late = [...firedAt].find(([before, decided]) => before < at && decided >= at)
        report.details.push(
          `trigger ${id}: the tick at ${new Date(at).toISOString()} never fired` +
            (late === undefined
              ? ""
              : ` (the tick at ${new Date(late[0]).toISOString()} fired ${late[1] - late[0]} ms late)`)
        )
      }
    }
  }
  return report
}
