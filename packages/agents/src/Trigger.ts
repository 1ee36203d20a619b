/**
 * The Trigger aggregate: a cron schedule that sends a message to a thread, built on durable timers.
 *
 *   trigger.put    → trigger.put { spec, nextAt } + timer `tick` at nextAt (moved when it exists)
 *   trigger.delete → trigger.deleted + the `tick` timer cancelled
 *   trigger.tick   (the timer's command) → trigger.fired + effect trigger.fire + timer `tick` at the next time
 *   trigger.fire settles → trigger.delivered (the message.send it dispatched was accepted or refused);
 *     refused because the thread was deleted → trigger.deleted too, and the tick timer cancelled
 *   the tick timer could not fire (the engine refused its stored command) → trigger.tick-failed +
 *     timer `tick` at the next time, so the schedule goes on (and the failure is on the record)
 *
 * The effect dispatches `message.send` to the thread under command id `trigger:<triggerId>:<tick ISO
 * time>`, so a tick reaches its thread once across restarts and processes: the receipt answers a
 * repeat as a duplicate. A tick names the time it was scheduled for; one that is not the trigger's
 * next time (an edit or a delete moved it since) is refused as stale. The next tick is searched
 * from the later of the tick's time and now, so after downtime spanning many ticks the overdue
 * timer fires once and the schedule goes on from now: missed ticks are not replayed one by one.
 * Pure, like every decider: the time comes from ctx.
 */
import {
  Aggregate,
  CommandId,
  Decision,
  type DecideContext,
  type EffectOutcome,
  type TimerFailure,
  TimerFailures
} from "@orchestration/engine"
import { Schema } from "effect"
import * as CronSchedule from "./CronSchedule.js"
import { ThreadId } from "./ThreadEvents.js"
import { TriggerId } from "./Tools.js"

/** What `trigger_edit` puts: when, where, and what to say. */
export const TriggerSpec = Schema.Struct({
  cron: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  timezone: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64))),
  threadId: ThreadId,
  text: Schema.String.pipe(Schema.maxLength(100_000))
})
export type TriggerSpec = typeof TriggerSpec.Type

/** The payload of a `trigger.fire` row: the tick, and the message it sends to its thread. */
export const TriggerFirePayload = Schema.Struct({
  triggerId: Schema.String,
  at: Schema.Number,
  threadId: Schema.String,
  text: Schema.String
})
export type TriggerFirePayload = typeof TriggerFirePayload.Type

export const TriggerEvent = Schema.Union(
  Aggregate.event("trigger.put", { spec: TriggerSpec, nextAt: Schema.Number }),
  /** `reason` when the trigger stopped itself (its thread was deleted); absent for `trigger.delete`. */
  Aggregate.event("trigger.deleted", { reason: Schema.optional(Schema.String) }),
  Aggregate.event("trigger.fired", {
    /** The tick's scheduled time. */
    at: Schema.Number,
    /** When it was decided: later than `at` by the timer's lateness, or by downtime. */
    firedAt: Schema.Number,
    effectId: Schema.String,
    nextAt: Schema.NullOr(Schema.Number)
  }),
  Aggregate.event("trigger.delivered", {
    /** The tick's scheduled time; absent when its stored payload could not be read and it was not the last tick fired. */
    at: Schema.optional(Schema.Number),
    effectId: Schema.String,
    status: Schema.Literal("succeeded", "failed", "cancelled"),
    error: Schema.NullOr(Schema.String)
  }),
  /** The tick at `at` could not fire (TimerFailures.ts says why); the next tick is at `nextAt`. */
  Aggregate.event("trigger.tick-failed", {
    at: Schema.Number,
    reason: TimerFailures.TimerFailureReason,
    message: Schema.String,
    nextAt: Schema.NullOr(Schema.Number)
  })
)
export type TriggerEvent = typeof TriggerEvent.Type

export interface TriggerState {
  readonly spec: TriggerSpec | null
  readonly deleted: boolean
  /** The time of the pending tick; null when none is scheduled. */
  readonly nextAt: number | null
  readonly lastFiredAt: number | null
}

export const initialState: TriggerState = { spec: null, deleted: false, nextAt: null, lastFiredAt: null }

export const evolve = (state: TriggerState, event: TriggerEvent): TriggerState => {
  switch (event.type) {
    case "trigger.put":
      return { ...state, spec: event.spec, deleted: false, nextAt: event.nextAt }
    case "trigger.deleted":
      return { ...state, deleted: true, nextAt: null }
    case "trigger.fired":
      return { ...state, nextAt: event.nextAt, lastFiredAt: event.at }
    case "trigger.tick-failed":
      return { ...state, nextAt: event.nextAt }
    case "trigger.delivered":
      return state
  }
}

/** The trigger's one timer: scheduling it again moves it. */
export const TICK_TIMER = "tick"

export const timezoneOf = (spec: TriggerSpec): string => spec.timezone ?? CronSchedule.DEFAULT_TIMEZONE

/** The id of a tick's effect and of the message.send it dispatches. */
export const tickId = (triggerId: string, at: number): string =>
  CommandId.boundedId("trigger:", `${triggerId}:${new Date(at).toISOString()}`)

const tickTimer = (triggerId: string, at: number) => ({
  timerId: TICK_TIMER,
  at,
  command: { type: "trigger.tick", triggerId, at }
})

const sameSpec = (a: TriggerSpec, b: TriggerSpec) =>
  a.cron === b.cron && timezoneOf(a) === timezoneOf(b) && a.threadId === b.threadId && a.text === b.text

export const decide = (
  state: TriggerState,
  command:
    | ({ readonly type: "trigger.put"; readonly triggerId: string } & TriggerSpec)
    | { readonly type: "trigger.delete"; readonly triggerId: string }
    | { readonly type: "trigger.tick"; readonly triggerId: string; readonly at: number },
  ctx: DecideContext
): Decision<TriggerEvent> | Aggregate.Rejection => {
  const triggerId = ctx.aggregateId
  switch (command.type) {
    case "trigger.put": {
      const spec: TriggerSpec = {
        cron: command.cron,
        ...(command.timezone === undefined ? {} : { timezone: command.timezone }),
        threadId: command.threadId,
        text: command.text
      }
      const problem = CronSchedule.problemOf(spec.cron, timezoneOf(spec), ctx.now)
      if (problem !== undefined) return Decision.reject(`invalid-${problem.field}`, problem.message)
      // Putting what is already there records nothing and keeps the tick's time, but schedules its
      // timer again: a timer a process without this aggregate marked failed (a rolling deploy) is re-armed.
      if (state.spec !== null && !state.deleted && sameSpec(state.spec, spec)) {
        return state.nextAt === null
          ? Decision.none()
          : Decision.of<TriggerEvent>({ timers: [tickTimer(triggerId, state.nextAt)] })
      }
      // A tick already due (its timer late, or the edit right after a restart) is kept, and fires now
      // with the edited spec: computed from now, it would be skipped, sent with neither text.
      const overdue = !state.deleted && state.nextAt !== null && state.nextAt <= ctx.now ? state.nextAt : undefined
      const nextAt = overdue ?? CronSchedule.nextFireAfter(spec.cron, timezoneOf(spec), ctx.now)!
      return Decision.of<TriggerEvent>({
        events: [{ type: "trigger.put", spec, nextAt }],
        timers: [tickTimer(triggerId, nextAt)]
      })
    }
    case "trigger.delete": {
      if (state.spec === null) return Decision.reject("not-found", `no trigger '${triggerId}'`)
      if (state.deleted) return Decision.none()
      return Decision.of<TriggerEvent>({ events: [{ type: "trigger.deleted" }], cancelTimers: [TICK_TIMER] })
    }
    case "trigger.tick": {
      // Only the engine's timer sends a tick (clients may not use the `timer:` prefix): a client's
      // command of this type would fire the trigger's message when it chose, not when the cron says.
      if (!ctx.commandId.startsWith("timer:")) {
        return Decision.reject("internal-only", "trigger.tick is sent by the engine's timer only")
      }
      if (state.spec === null || state.deleted) return Decision.reject("trigger-deleted", `no trigger '${triggerId}'`)
      if (state.nextAt !== command.at) {
        return Decision.reject("stale-tick", `the tick at ${new Date(command.at).toISOString()} is no longer scheduled`)
      }
      if (ctx.now < command.at) {
        return Decision.reject("not-due", `the tick at ${new Date(command.at).toISOString()} is not due yet`)
      }
      const spec = state.spec
      const effectId = tickId(triggerId, command.at)
      const nextAt = CronSchedule.nextFireAfter(spec.cron, timezoneOf(spec), Math.max(command.at, ctx.now)) ?? null
      return Decision.of<TriggerEvent>({
        events: [{ type: "trigger.fired", at: command.at, firedAt: ctx.now, effectId, nextAt }],
        effects: [
          {
            id: effectId,
            kind: "trigger.fire",
            payload: {
              triggerId,
              at: command.at,
              threadId: spec.threadId,
              text: spec.text
            } satisfies TriggerFirePayload
          }
        ],
        ...(nextAt === null ? {} : { timers: [tickTimer(triggerId, nextAt)] })
      })
    }
  }
}

const isFinal = (status: EffectOutcome["status"]): status is "succeeded" | "failed" | "cancelled" =>
  status === "succeeded" || status === "failed" || status === "cancelled"

/** The code `trigger.fire` fails with when the thread refused its message because it was deleted. */
export const THREAD_DELETED = "thread-deleted"

/**
 * The tick's scheduled time: the one its payload names, or, for a row whose stored payload could not
 * be read (`payload: null`), the last fired tick's when the effect is its; otherwise unknown.
 */
const tickTimeOf = (state: TriggerState, triggerId: string, payload: { at?: unknown } | null, effectId: string) => {
  if (typeof payload?.at === "number" && Number.isFinite(payload.at)) return payload.at
  return state.lastFiredAt !== null && tickId(triggerId, state.lastFiredAt) === effectId ? state.lastFiredAt : undefined
}

export const onOutcome = (state: TriggerState, outcome: EffectOutcome, ctx: DecideContext): Decision<TriggerEvent> => {
  if (outcome.kind !== "trigger.fire" || !isFinal(outcome.status)) return Decision.none()
  const payload = outcome.payload as { at?: unknown; threadId?: unknown } | null
  const at = tickTimeOf(state, ctx.aggregateId, payload, outcome.effectId)
  const delivered: TriggerEvent = {
    type: "trigger.delivered",
    ...(at === undefined ? {} : { at }),
    effectId: outcome.effectId,
    status: outcome.status,
    error: outcome.error?.message ?? null
  }
  // A deleted thread refuses every message from now on: ticking on would only record failures.
  // Unless the trigger was pointed at another thread since this tick, it stops (a put revives it).
  const threadGone =
    outcome.status === "failed" &&
    outcome.error?.code === THREAD_DELETED &&
    state.spec !== null &&
    !state.deleted &&
    state.spec.threadId === payload?.threadId
  if (!threadGone) return Decision.of<TriggerEvent>({ events: [delivered] })
  return Decision.of<TriggerEvent>({
    events: [delivered, { type: "trigger.deleted", reason: `its thread '${state.spec!.threadId}' was deleted` }],
    cancelTimers: [TICK_TIMER]
  })
}

/**
 * The tick timer could not fire: its stored command was refused for good (one written by another
 * build) or is unreadable. Without this the trigger would wait for that tick forever. The failure is
 * recorded and the next tick scheduled as a fired tick would, with a command of this build; nothing
 * is sent for the tick that failed. A failure of a tick the trigger no longer expects (moved by an
 * edit, or deleted) changes nothing.
 */
export const onTimerFailed = (
  state: TriggerState,
  failure: TimerFailure,
  ctx: DecideContext
): Decision<TriggerEvent> => {
  if (failure.timerId !== TICK_TIMER || state.spec === null || state.deleted || state.nextAt !== failure.at) {
    return Decision.none()
  }
  const spec = state.spec
  const nextAt = CronSchedule.nextFireAfter(spec.cron, timezoneOf(spec), Math.max(failure.at, ctx.now)) ?? null
  return Decision.of<TriggerEvent>({
    events: [{ type: "trigger.tick-failed", at: failure.at, reason: failure.reason, message: failure.message, nextAt }],
    ...(nextAt === null ? {} : { timers: [tickTimer(ctx.aggregateId, nextAt)] })
  })
}

export const Trigger = Aggregate.make({
  name: "trigger",
  commands: {
    "trigger.put": Aggregate.command("trigger.put", { triggerId: TriggerId, ...TriggerSpec.fields }),
    "trigger.delete": Aggregate.command("trigger.delete", { triggerId: TriggerId }),
    "trigger.tick": Aggregate.command("trigger.tick", { triggerId: TriggerId, at: Schema.Number })
  },
  events: TriggerEvent,
  aggregateId: (command) => command.triggerId,
  initialState,
  evolve,
  decide,
  onOutcome,
  onTimerFailed
})
export type TriggerAggregate = typeof Trigger
