/**
 * How late durable timers fire on the real clock: `count` timers `spacingMs` apart over four
 * aggregates, fired by the engine's timer loop (Boot, TimerLoop.ts) through the front door. Lateness
 * is the fire's recorded time minus its due time. The loop sleeps exactly until the next due time, so
 * this measures the claim, the dispatch and the event loop's own delay, not a polling period. It used
 * to be a unit test with a bound; a bound on a shared machine is a speed claim, so it is measured here.
 */
import { Aggregate, Boot, Decision, Engine } from "@orchestration/engine"
import { Effect, Layer, Schema } from "effect"
import { engineLayer, runBench } from "./EngineStack.js"

const AlarmEvent = Schema.Union(
  Aggregate.event("alarm.set", { alarmId: Schema.String, at: Schema.Number }),
  Aggregate.event("alarm.fired", { alarmId: Schema.String, at: Schema.Number })
)
type AlarmEvent = typeof AlarmEvent.Type

/** One timer per `alarm.set`; its fire records when it ran. */
const Alarm = Aggregate.make({
  name: "alarm",
  commands: {
    "alarm.set": Aggregate.command("alarm.set", { ownerId: Schema.String, alarmId: Schema.String, at: Schema.Number }),
    "alarm.fire": Aggregate.command("alarm.fire", { ownerId: Schema.String, alarmId: Schema.String })
  },
  events: AlarmEvent,
  aggregateId: (command) => command.ownerId,
  initialState: {},
  evolve: (state: object) => state,
  decide: (_state, command, ctx) =>
    command.type === "alarm.set"
      ? Decision.of<AlarmEvent>({
          events: [{ type: "alarm.set", alarmId: command.alarmId, at: command.at }],
          timers: [
            {
              timerId: command.alarmId,
              at: command.at,
              command: { type: "alarm.fire", ownerId: command.ownerId, alarmId: command.alarmId }
            }
          ]
        })
      : Decision.of<AlarmEvent>({ events: [{ type: "alarm.fired", alarmId: command.alarmId, at: ctx.now }] })
})

/** Lateness of each fire in ms (recorded time − due time), in the order they fired. */
export const runTimerLateness = (dir: string, count = 40, spacingMs = 25): Promise<Array<number>> =>
  runBench(
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      // A second's lead, so every timer is set before the first is due, even on a loaded machine.
      const start = Date.now() + 1_000
      const due = new Map<string, number>()
      for (let i = 0; i < count; i++) {
        const alarmId = `a${i}`
        due.set(alarmId, start + i * spacingMs)
        yield* engine.dispatchWithReceipt({
          commandId: `set-${i}`,
          type: "alarm.set",
          ownerId: `o-${i % 4}`,
          alarmId,
          at: start + i * spacingMs
        })
      }
      const fired = () => Effect.map(engine.readEvents(), (events) => events.filter((e) => e.type === "alarm.fired"))
      const deadline = start + count * spacingMs + 30_000
      let events = yield* fired()
      while (events.length < count) {
        if (Date.now() > deadline) return yield* Effect.dieMessage(`only ${events.length} of ${count} timers fired`)
        yield* Effect.sleep("50 millis")
        events = yield* fired()
      }
      return events.map((e) => e.occurredAt - due.get((e.payload as { alarmId: string }).alarmId)!)
    }).pipe(
      Effect.provide(
        Boot.layer<never>({
          reactors: [],
          retention: false,
          worker: { ownerId: "bench-timers", nodeId: "bench" }
        }).pipe(Layer.provideMerge(engineLayer(dir, { aggregates: [Alarm], projections: [] })))
      )
    )
  )
