/**
 * The trigger decider as a specification: given the trigger's events, when a put, delete, tick, a
 * tick's outcome or its timer's failure arrives, then these events, effects and timers (or this rejection). Pure.
 */
import { assert, describe, it } from "@effect/vitest"
import type { DecideContext, EffectOutcome, TimerFailure } from "@orchestration/engine"
import * as CronSchedule from "../src/CronSchedule.js"
import { Trigger, type TriggerEvent, type TriggerSpec, tickId } from "../src/Trigger.js"

type Command = Parameters<(typeof Trigger)["decide"]>[1]

const at = (iso: string) => Date.parse(iso)
const ctxAt = (now: number): DecideContext => ({
  commandId: "cmd",
  aggregateId: "daily",
  now,
  deriveId: (key) => `cmd:${key}`
})

interface Expected {
  readonly events?: ReadonlyArray<TriggerEvent>
  readonly effects?: ReadonlyArray<readonly [string, string, unknown]>
  /** Timers as `[timerId, at, command]`. */
  readonly timers?: ReadonlyArray<readonly [string, number, unknown]>
  readonly cancelTimers?: ReadonlyArray<string>
}

const given = (events: ReadonlyArray<TriggerEvent>) => ({
  when: (input: Command | EffectOutcome | TimerFailure, now: number) => {
    const state = events.reduce(Trigger.evolve, Trigger.initialState)
    // A command is decided under its own id (a tick's tells who sent it); an outcome under the fixture's.
    const ctx = { ...ctxAt(now), ...("commandId" in input ? { commandId: input.commandId } : {}) }
    const answer =
      "status" in input
        ? Trigger.onOutcome!(state, input, ctx)
        : "timerId" in input
          ? Trigger.onTimerFailed!(state, input, ctx)
          : Trigger.decide(state, input, ctx)
    return {
      thenDecide: (expected: Expected) => {
        if (answer._tag === "Rejection") assert.fail(`rejected: ${answer.reason}: ${answer.message}`)
        assert.deepStrictEqual(answer.events, expected.events ?? [])
        assert.deepStrictEqual(
          answer.effects.map((e) => [e.id, e.kind, e.payload]),
          (expected.effects ?? []).map((e) => [...e])
        )
        assert.deepStrictEqual(
          (answer.timers ?? []).map((t) => [t.timerId, t.at, t.command]),
          (expected.timers ?? []).map((t) => [...t])
        )
        assert.deepStrictEqual(answer.cancelTimers ?? [], expected.cancelTimers ?? [])
        answer.events.reduce(Trigger.evolve, state)
      },
      thenReject: (reason: string, message?: RegExp) => {
        if (answer._tag !== "Rejection") assert.fail(`accepted with ${answer.events.length} events`)
        assert.strictEqual(answer.reason, reason)
        if (message !== undefined) assert.match(answer.message, message)
      }
    }
  }
})

const spec: TriggerSpec = { cron: "0 9 * * *", threadId: "inbox", text: "good morning" }
const put = (s: Partial<TriggerSpec> = {}): Command => ({
  commandId: "p",
  type: "trigger.put",
  triggerId: "daily",
  ...spec,
  ...s
})
const tick = (time: number): Command => ({ commandId: "timer:x", type: "trigger.tick", triggerId: "daily", at: time })
const tickCommand = (time: number) => ({ type: "trigger.tick", triggerId: "daily", at: time })

const nine = at("2026-06-01T09:00:00Z")
const nineNext = at("2026-06-02T09:00:00Z")
const putEvent: TriggerEvent = { type: "trigger.put", spec, nextAt: nine }

/** The settled `trigger.fire` of the tick at `time`, as its reactor reports it. */
const fireOutcome = (time: number, fields: Partial<EffectOutcome> & Pick<EffectOutcome, "status">): EffectOutcome => ({
  effectId: tickId("daily", time),
  kind: "trigger.fire",
  payload: { triggerId: "daily", at: time, threadId: "inbox", text: "good morning" },
  attempt: 1,
  by: "reactor",
  ...fields
})

/** The failed delivery of the tick at `time`, as `trigger.delivered` records it (without `at` when unknown). */
const failedDelivery = (time: number, error: string, options: { readonly timeKnown?: boolean } = {}): TriggerEvent => ({
  type: "trigger.delivered",
  ...(options.timeKnown === false ? {} : { at: time }),
  effectId: tickId("daily", time),
  status: "failed",
  error
})

/** The engine's word that the tick timer of `time` could not fire. */
const tickFailed = (time: number, timerId = "tick"): TimerFailure => ({
  timerId,
  generation: 1,
  at: time,
  command: { triggerId: "daily", type: "trigger.tick" },
  reason: "invalid-command",
  message: "invalid 'trigger.tick' command"
})

describe("the trigger decider", () => {
  it("a put schedules the tick timer at the cron's next time after now", () =>
    given([])
      .when(put(), at("2026-06-01T08:00:00Z"))
      .thenDecide({ events: [putEvent], timers: [["tick", nine, tickCommand(nine)]] }))

  it("putting the same spec again records nothing and keeps the tick's time (its timer re-armed)", () =>
    given([putEvent])
      .when(put(), at("2026-06-01T08:30:00Z"))
      .thenDecide({ timers: [["tick", nine, tickCommand(nine)]] }))

  it("an edit moves the tick to the new cron's next time", () => {
    const edited = { ...spec, cron: "30 8 * * *" }
    const next = at("2026-06-01T08:30:00Z")
    given([putEvent])
      .when(put({ cron: "30 8 * * *" }), at("2026-06-01T08:10:00Z"))
      .thenDecide({
        events: [{ type: "trigger.put", spec: edited, nextAt: next }],
        timers: [["tick", next, tickCommand(next)]]
      })
  })

  it("an edit decided while a tick is overdue (its timer late, or the edit right after a restart) keeps that tick, now", () => {
    const edited = { ...spec, text: "GOOD MORNING" }
    given([putEvent])
      .when(put({ text: "GOOD MORNING" }), nine + 5_000)
      .thenDecide({
        events: [{ type: "trigger.put", spec: edited, nextAt: nine }],
        timers: [["tick", nine, tickCommand(nine)]]
      })
  })

  it("a bad cron, a seconds field or an unknown time zone is a typed refusal, not a crash", () => {
    given([])
      .when(put({ cron: "every day" }), 0)
      .thenReject("invalid-cron", /five are required/)
    given([])
      .when(put({ cron: "61 * * * *" }), 0)
      .thenReject("invalid-cron", /not valid/)
    given([])
      .when(put({ cron: "*/5 * * * * *" }), 0)
      .thenReject("invalid-cron", /6 fields/)
    given([])
      .when(put({ cron: "0 0 30 2 *" }), 0)
      .thenReject("invalid-cron", /never fires/)
    given([])
      .when(put({ timezone: "Mars/Olympus" }), 0)
      .thenReject("invalid-timezone", /IANA/)
  })

  it("a due tick fires: the message effect under the tick's id, and the next tick scheduled", () => {
    const effectId = "trigger:daily:2026-06-01T09:00:00.000Z"
    assert.strictEqual(tickId("daily", nine), effectId)
    given([putEvent])
      .when(tick(nine), nine + 40)
      .thenDecide({
        events: [{ type: "trigger.fired", at: nine, firedAt: nine + 40, effectId, nextAt: nineNext }],
        effects: [
          [effectId, "trigger.fire", { triggerId: "daily", at: nine, threadId: "inbox", text: "good morning" }]
        ],
        timers: [["tick", nineNext, tickCommand(nineNext)]]
      })
  })

  it("after downtime spanning several ticks, the overdue tick fires once and the next is after now", () => {
    const threeDaysLate = at("2026-06-04T10:00:00Z")
    const next = at("2026-06-05T09:00:00Z")
    given([putEvent])
      .when(tick(nine), threeDaysLate)
      .thenDecide({
        events: [
          { type: "trigger.fired", at: nine, firedAt: threeDaysLate, effectId: tickId("daily", nine), nextAt: next }
        ],
        effects: [
          [
            tickId("daily", nine),
            "trigger.fire",
            { triggerId: "daily", at: nine, threadId: "inbox", text: "good morning" }
          ]
        ],
        timers: [["tick", next, tickCommand(next)]]
      })
  })

  it("a tick the trigger no longer expects (moved by an edit, or fired already) is refused as stale", () => {
    const fired: TriggerEvent = {
      type: "trigger.fired",
      at: nine,
      firedAt: nine,
      effectId: tickId("daily", nine),
      nextAt: nineNext
    }
    given([putEvent, fired])
      .when(tick(nine), nine + 5)
      .thenReject("stale-tick")
    given([putEvent, { type: "trigger.put", spec: { ...spec, cron: "0 10 * * *" }, nextAt: nine + 3_600_000 }])
      .when(tick(nine), nine)
      .thenReject("stale-tick")
  })

  it("a tick before its time is refused (a forged or early command fires nothing)", () =>
    given([putEvent])
      .when(tick(nine), nine - 1)
      .thenReject("not-due"))

  it("a tick not sent by the engine's timer is refused, even when it is due (clients cannot fire a trigger)", () => {
    given([putEvent])
      .when({ ...tick(nine), commandId: "client-tick-1" }, nine)
      .thenReject("internal-only")
    given([putEvent])
      .when({ ...tick(nine), commandId: "client-tick-1" }, nine + 3_600_000)
      .thenReject("internal-only")
  })

  it("a delete cancels the tick timer; a tick after it is refused; deleting again changes nothing", () => {
    const deleteCommand: Command = { commandId: "d", type: "trigger.delete", triggerId: "daily" }
    given([putEvent])
      .when(deleteCommand, nine - 10)
      .thenDecide({ events: [{ type: "trigger.deleted" }], cancelTimers: ["tick"] })
    given([putEvent, { type: "trigger.deleted" }])
      .when(tick(nine), nine)
      .thenReject("trigger-deleted")
    given([putEvent, { type: "trigger.deleted" }])
      .when(deleteCommand, nine)
      .thenDecide({})
    given([]).when(deleteCommand, nine).thenReject("not-found")
  })

  it("a put after a delete brings the trigger back with a new tick", () =>
    given([putEvent, { type: "trigger.deleted" }])
      .when(put(), at("2026-06-01T10:00:00Z"))
      .thenDecide({
        events: [{ type: "trigger.put", spec, nextAt: nineNext }],
        timers: [["tick", nineNext, tickCommand(nineNext)]]
      }))

  it("a tick's settled message is recorded as its delivery; a retry is not", () => {
    const outcome = (status: EffectOutcome["status"]): EffectOutcome =>
      fireOutcome(nine, {
        status,
        ...(status === "failed" ? { error: { message: "thread 'inbox' refused", reason: "handler" as const } } : {})
      })
    given([putEvent])
      .when(outcome("failed"), nine)
      .thenDecide({
        events: [failedDelivery(nine, "thread 'inbox' refused")]
      })
    given([putEvent]).when(outcome("retrying"), nine).thenDecide({})
  })

  it("a tick whose stored payload could not be read is recorded as a failed delivery, its time found by its effect id", () => {
    // Outbox.toRow gives such a row `payload: null`; verdictFor fails it for good, unperformed.
    const unreadable = (time: number): EffectOutcome =>
      fireOutcome(time, {
        payload: null,
        status: "failed",
        error: { message: "not performed: bad JSON", code: "payload-undecodable", reason: "defect" }
      })
    const fired: TriggerEvent = {
      type: "trigger.fired",
      at: nine,
      firedAt: nine,
      effectId: tickId("daily", nine),
      nextAt: nineNext
    }
    given([putEvent, fired])
      .when(unreadable(nine), nine)
      .thenDecide({
        events: [failedDelivery(nine, "not performed: bad JSON")]
      })
    // An older tick than the last one fired: its time is not known, and is not made up.
    const earlier = nine - 86_400_000
    given([putEvent, fired])
      .when(unreadable(earlier), nine)
      .thenDecide({
        events: [failedDelivery(earlier, "not performed: bad JSON", { timeKnown: false })]
      })
  })

  it("a tick whose timer could not fire is recorded, and the next tick is scheduled so the schedule goes on", () =>
    given([putEvent])
      .when(tickFailed(nine), nine + 40)
      .thenDecide({
        events: [
          {
            type: "trigger.tick-failed",
            at: nine,
            reason: "invalid-command",
            message: "invalid 'trigger.tick' command",
            nextAt: nineNext
          }
        ],
        timers: [["tick", nineNext, tickCommand(nineNext)]]
      }))

  it("a timer failure of a tick the trigger no longer expects, or of a deleted trigger, changes nothing", () => {
    given([putEvent])
      .when(tickFailed(nine - 86_400_000), nine)
      .thenDecide({})
    given([putEvent, { type: "trigger.deleted" }])
      .when(tickFailed(nine), nine)
      .thenDecide({})
    given([putEvent]).when(tickFailed(nine, "other"), nine).thenDecide({})
  })

  it("a tick refused because its thread was deleted stops the trigger: no more ticks to a thread that is gone", () => {
    const refused = (threadId: string): EffectOutcome =>
      fireOutcome(nine, {
        payload: { triggerId: "daily", at: nine, threadId, text: "good morning" },
        status: "failed",
        error: { message: "thread 'inbox' was deleted", code: "thread-deleted", reason: "handler" }
      })
    const delivered: TriggerEvent = failedDelivery(nine, "thread 'inbox' was deleted")
    given([putEvent])
      .when(refused("inbox"), nine)
      .thenDecide({
        events: [delivered, { type: "trigger.deleted", reason: "its thread 'inbox' was deleted" }],
        cancelTimers: ["tick"]
      })
    // Edited to another thread since that tick: the trigger goes on.
    const moved: TriggerEvent = { type: "trigger.put", spec: { ...spec, threadId: "other" }, nextAt: nineNext }
    given([putEvent, moved])
      .when(refused("inbox"), nine)
      .thenDecide({ events: [delivered] })
    // Deleted already: the delivery is recorded, nothing else.
    given([putEvent, { type: "trigger.deleted" }])
      .when(refused("inbox"), nine)
      .thenDecide({ events: [delivered] })
  })
})

/** The first `n` fire times of `cron` in `timezone` after `from`, each searched from the one before. */
const firesOf = (cron: string, timezone: string, from: string, n: number): Array<string> => {
  let t = at(from)
  const fires: Array<string> = []
  for (let i = 0; i < n; i++) {
    t = CronSchedule.nextFireAfter(cron, timezone, t)!
    fires.push(new Date(t).toISOString())
  }
  return fires
}

describe("cron schedules across DST switches", () => {
  it("0 2 * * * in America/New_York: the skipped 02:00 fires at 03:00 EDT, then 02:00 EDT", () => {
    // 2026-03-08 02:00 EST does not exist (clocks jump to 03:00 EDT = 07:00Z).
    assert.deepStrictEqual(firesOf("0 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", 3), [
      "2026-03-08T07:00:00.000Z",
      "2026-03-09T06:00:00.000Z",
      "2026-03-10T06:00:00.000Z"
    ])
  })

  it("several minutes in the skipped hour fire once, at the first valid minute after the gap", () => {
    const springForward = "2026-03-07T12:00:00Z"
    assert.deepStrictEqual(firesOf("0,30 2 * * *", "America/New_York", springForward, 3), [
      "2026-03-08T07:00:00.000Z",
      "2026-03-09T06:00:00.000Z",
      "2026-03-09T06:30:00.000Z"
    ])
    assert.deepStrictEqual(firesOf("*/20 2 * * *", "America/New_York", springForward, 2), [
      "2026-03-08T07:00:00.000Z",
      "2026-03-09T06:00:00.000Z"
    ])
    assert.deepStrictEqual(firesOf("5-10 2 * * *", "America/New_York", springForward, 2), [
      "2026-03-08T07:00:00.000Z",
      "2026-03-09T06:05:00.000Z"
    ])
    // A minute of the gap and 03:00 itself are one fire, not two at the same instant.
    assert.deepStrictEqual(firesOf("0,30 2,3 * * *", "America/New_York", springForward, 3), [
      "2026-03-08T07:00:00.000Z",
      "2026-03-08T07:30:00.000Z",
      "2026-03-09T06:00:00.000Z"
    ])
  })

  it("30 2 * * * in Europe/Berlin: the doubled 02:30 on the fall-back night fires once", () => {
    // 02:30 CEST (+2) on the 24th and at its first occurrence on the 25th (02:00-03:00 repeats that
    // night: 00:30Z CEST, then 01:30Z CET, which does not fire again); then 02:30 CET (+1).
    assert.deepStrictEqual(firesOf("30 2 * * *", "Europe/Berlin", "2026-10-23T12:00:00Z", 3), [
      "2026-10-24T00:30:00.000Z",
      "2026-10-25T00:30:00.000Z",
      "2026-10-26T01:30:00.000Z"
    ])
  })

  it("an hour list, a range or a minute step in the repeated hour fires each local time once", () => {
    // America/New_York, 2026-11-01: 01:00-02:00 happens twice (EDT 05:00Z-06:00Z, then EST 06:00Z-07:00Z).
    const fallBack = "2026-10-31T12:00:00Z"
    assert.deepStrictEqual(firesOf("30 1,2 * * *", "America/New_York", fallBack, 3), [
      "2026-11-01T05:30:00.000Z",
      "2026-11-01T07:30:00.000Z",
      "2026-11-02T06:30:00.000Z"
    ])
    assert.deepStrictEqual(firesOf("0 1-3 * * *", "America/New_York", fallBack, 4), [
      "2026-11-01T05:00:00.000Z",
      "2026-11-01T07:00:00.000Z",
      "2026-11-01T08:00:00.000Z",
      "2026-11-02T06:00:00.000Z"
    ])
    assert.deepStrictEqual(firesOf("*/30 1 * * *", "America/New_York", fallBack, 3), [
      "2026-11-01T05:00:00.000Z",
      "2026-11-01T05:30:00.000Z",
      "2026-11-02T06:00:00.000Z"
    ])
    // Searched from inside the repeated hour's second pass, the first pass's times are not fired again.
    assert.deepStrictEqual(firesOf("30 1 * * *", "America/New_York", "2026-11-01T06:10:00Z", 1), [
      "2026-11-02T06:30:00.000Z"
    ])
  })

  it("a wildcard hour follows real time: no fire in the skipped hour, both passes of the repeated one", () => {
    assert.deepStrictEqual(firesOf("30 * * * *", "America/New_York", "2026-03-08T05:00:00Z", 3), [
      "2026-03-08T05:30:00.000Z",
      "2026-03-08T06:30:00.000Z",
      "2026-03-08T07:30:00.000Z"
    ])
    assert.deepStrictEqual(firesOf("30 * * * *", "America/New_York", "2026-11-01T05:00:00Z", 3), [
      "2026-11-01T05:30:00.000Z",
      "2026-11-01T06:30:00.000Z",
      "2026-11-01T07:30:00.000Z"
    ])
    assert.deepStrictEqual(firesOf("*/2 * * * *", "America/New_York", "2026-11-01T05:57:00Z", 3), [
      "2026-11-01T05:58:00.000Z",
      "2026-11-01T06:00:00.000Z",
      "2026-11-01T06:02:00.000Z"
    ])
  })

  it("a half-hour switch (Australia/Lord_Howe) and a skipped day (Pacific/Apia, 2011-12-30)", () => {
    // Lord Howe, 2026-10-04: 02:00 (+10:30) jumps to 02:30 (+11); 02:00 and 02:15 fire once at 02:30.
    assert.deepStrictEqual(firesOf("0,15,30,45 2 * * *", "Australia/Lord_Howe", "2026-10-03T00:00:00Z", 3), [
      "2026-10-03T15:30:00.000Z",
      "2026-10-03T15:45:00.000Z",
      "2026-10-04T15:00:00.000Z"
    ])
    // Lord Howe, 2026-04-05: 02:00 (+11) goes back to 01:30 (+10:30); 01:30 and 01:45 fire once.
    assert.deepStrictEqual(firesOf("0,30,45 1 * * *", "Australia/Lord_Howe", "2026-04-04T00:00:00Z", 4), [
      "2026-04-04T14:00:00.000Z",
      "2026-04-04T14:30:00.000Z",
      "2026-04-04T14:45:00.000Z",
      "2026-04-05T14:30:00.000Z"
    ])
    // Apia went from -10 to +14 at the end of 2011-12-29: the 30th never happened there.
    assert.deepStrictEqual(firesOf("0 0 * * *", "Pacific/Apia", "2011-12-28T12:00:00Z", 3), [
      "2011-12-29T10:00:00.000Z",
      "2011-12-30T10:00:00.000Z",
      "2011-12-31T10:00:00.000Z"
    ])
  })
})
