/**
 * A timer whose aggregate was told it can never fire is never fired afterwards: not when the write
 * marking it failed was refused (or the process died between the tell and the mark) and a later
 * claim finds it pending again, even once the store heals and the bug behind the failure is fixed.
 * Found by a review (2026-12-05): the timer fired after its aggregate had recorded it could not.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema, TestClock } from "effect"
import { Aggregate, Decision, Engine, Timers } from "../src/index.js"
import * as TestStore from "../src/testing/TestStore.js"
import { tempDbFile } from "./fixtures/harness.js"
import { eventually, settle, stackOverStore } from "./fixtures/reactors.js"

/** Whether the ticker's decider has its bug (a defect in domain code, fixed by the next deploy). */
const bug = { on: true }

const Started = Aggregate.event("ticker.started", { at: Schema.Number })
const Ticked = Aggregate.event("ticker.ticked", { at: Schema.Number })
const Failed = Aggregate.event("ticker.timer-failed", { timerId: Schema.String, reason: Schema.String })
const TickerEvent = Schema.Union(Started, Ticked, Failed)
type TickerEvent = typeof TickerEvent.Type

const Ticker = Aggregate.make({
  name: "ticker",
  commands: {
    "ticker.start": Aggregate.command("ticker.start", { tickerId: Schema.String, at: Schema.Number }),
    "ticker.tick": Aggregate.command("ticker.tick", { tickerId: Schema.String })
  },
  events: TickerEvent,
  aggregateId: (command) => command.tickerId,
  initialState: {} as object,
  evolve: (state: object) => state,
  decide: (_state, command, ctx) => {
    switch (command.type) {
      case "ticker.start":
        return Decision.of<TickerEvent>({
          events: [{ type: "ticker.started", at: command.at }],
          timers: [{ timerId: "tick", at: command.at, command: { type: "ticker.tick", tickerId: command.tickerId } }]
        })
      case "ticker.tick":
        if (bug.on) throw new Error("the ticker's decider has a bug")
        return Decision.of<TickerEvent>({ events: [{ type: "ticker.ticked", at: ctx.now }] })
    }
  },
  onTimerFailed: (_state, failure) =>
    Decision.of<TickerEvent>({
      events: [{ type: "ticker.timer-failed", timerId: failure.timerId, reason: failure.reason }]
    })
})

const stack = (filename: string) =>
  stackOverStore([], { engine: { aggregates: [Ticker], projections: [] } }).pipe(
    Layer.provideMerge(TestStore.layer({ filename }))
  )

const eventTypes = Effect.map(Engine.Engine, (e) => e).pipe(
  Effect.flatMap((e) => e.readEvents()),
  Effect.map((events) => events.filter((r) => r.aggregateId === "k-1").map((r) => r.type))
)

describe("a timer told failed is never fired afterwards", () => {
  it.effect("a refused 'failed' mark after the tell does not let the timer fire later", () => {
    const file = tempDbFile()
    bug.on = true
    return Effect.gen(function* () {
      // given a timer whose fire fails in its aggregate's code at each of the defect tries
      const e = yield* Engine.Engine
      const sql = yield* SqlClient
      yield* e.dispatchWithReceipt({ commandId: "start-1", type: "ticker.start", tickerId: "k-1", at: 5_000 })
      // and a store that refuses the statement marking the timer failed (a failing device, a full disk)
      yield* sql.unsafe(`CREATE TRIGGER refuse_failed_mark BEFORE UPDATE OF status ON timers
        WHEN NEW.status = 'failed' BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END`)
      yield* TestClock.adjust("5 seconds")
      for (let lease = 0; lease < 10 && !(yield* eventTypes).includes("ticker.timer-failed"); lease++) {
        yield* settle
        yield* TestClock.adjust("30 seconds")
      }
      // then the aggregate was told that its timer can never fire
      yield* eventually(
        Effect.map(eventTypes, (types) => types.includes("ticker.timer-failed")),
        "the aggregate was told"
      )
      yield* settle
      // when the store heals and the bug is fixed (the next deploy), and a lease passes
      yield* sql.unsafe(`DROP TRIGGER refuse_failed_mark`)
      bug.on = false
      for (let lease = 0; lease < 4; lease++) {
        yield* TestClock.adjust("30 seconds")
        yield* settle
      }
      // then the timer its aggregate was told can never fire did not fire after all
      const types = yield* eventTypes
      const [row] = yield* Timers.ofAggregate("ticker", "k-1")
      assert.deepStrictEqual(
        { events: types, status: row!.status },
        { events: ["ticker.started", "ticker.timer-failed"], status: "failed" },
        "a timer whose aggregate was told it can never fire was fired afterwards"
      )
    }).pipe(Effect.provide(stack(file)))
  })
})
