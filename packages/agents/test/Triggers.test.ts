/**
 * Triggers end to end under TestClock: a trigger put through the front door fires through the
 * engine's durable timers, its tick sends message.send to the thread under `trigger:<id>:<tick>`,
 * and the thread runs a turn on it. No real sleeps: the clock moves only when a test moves it.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Engine } from "@orchestration/engine"
import { Effect, TestClock } from "effect"
import { threadView } from "../src/ThreadReadModel.js"
import { listTriggers } from "../src/TriggerReadModel.js"
import { World } from "../src/World.js"
import { agentsStack, allTurnsTerminal, eventually, script, send, tempDir } from "./fixtures/agents.js"

const at = (iso: string) => Date.parse(iso)

const put = (commandId: string, triggerId: string, spec: Record<string, unknown>) => ({
  commandId,
  type: "trigger.put",
  triggerId,
  ...spec
})

/** The message.send commands ticks dispatched, by id, in the order they were accepted. */
const tickSends = Effect.gen(function* () {
  const sql = yield* SqlClient
  const rows = yield* sql<{ command_id: string; aggregate_id: string; status: string }>`SELECT command_id, aggregate_id,
    status FROM receipts WHERE command_type = 'message.send' AND command_id LIKE 'trigger:%' ORDER BY last_sequence`
  return rows.map((r) => `${r.aggregate_id} ${r.command_id} ${r.status}`)
})

const sendsAre = (n: number) => Effect.map(tickSends, (sends) => sends.length === n)

/**
 * Moves the clock to `iso` a minute (or `stepMs`) at a time, letting the event loop turn between moves, so a
 * fire woken by one move lands (and schedules the next tick) before the next move.
 */
const nextTurn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

const advanceTo = (iso: string, stepMs = 60_000) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const target = at(iso)
    while (true) {
      const now = yield* TestClock.currentTimeMillis
      if (now >= target) return
      yield* TestClock.adjust(Math.min(stepMs, target - now))
      // A performance this move started ends before time moves on: a step is longer than an
      // effect's 30 s timeout, and on PostgreSQL a handler takes real round trips. One turn of the
      // event loop was once too few there, and the next step timed a tick's effect out.
      for (let turn = 0; turn < 200; turn++) {
        yield* nextTurn
        const [running] = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM outbox WHERE status = 'running'`
        if (Number(running!.n) === 0) break
      }
    }
  })

/** Lets the fibers woken by the last move finish (a fire, its effect, the turn it starts). */
const settle = eventually(Effect.succeed(true), "settle", 1).pipe(Effect.repeatN(200))

/** Starts the stack at `iso` (its fibers see that time from their first read). */
const startingAt = <A, E, R>(iso: string, body: Effect.Effect<A, E, R>, dir = tempDir()) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(at(iso))
    return yield* body.pipe(Effect.provide(agentsStack({ dir, slowPolls: true })))
  })

describe("triggers fire through durable timers", () => {
  it.effect("an hourly trigger fires once per tick, at its time, and each tick starts a turn on its thread", () =>
    startingAt(
      "2026-06-01T08:30:00Z",
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(
          put("put-1", "hourly", { cron: "0 * * * *", threadId: "inbox", text: "check the queue" })
        )
        assert.deepStrictEqual(
          (yield* listTriggers({ limit: 10 })).map((t) => [t.triggerId, t.nextFireAt]),
          [["hourly", at("2026-06-01T09:00:00Z")]]
        )
        yield* advanceTo("2026-06-01T08:59:59Z")
        yield* settle
        assert.deepStrictEqual(yield* tickSends, [])
        yield* advanceTo("2026-06-01T09:00:00Z")
        yield* eventually(sendsAre(1), "the 09:00 tick sent")
        yield* eventually(allTurnsTerminal("inbox", 1), "its turn done")
        // The same fire again (a claimer that died before marking the timer fired): its receipt answers.
        const again = yield* engine.dispatchWithReceipt(
          {
            commandId: "timer:trigger:hourly:tick#1",
            type: "trigger.tick",
            triggerId: "hourly",
            at: at("2026-06-01T09:00:00Z")
          },
          { origin: "internal" }
        )
        assert.isTrue(again.duplicate)
        // The same tick under another id is no longer the trigger's next tick.
        const stale = yield* Effect.flip(
          engine.dispatchWithReceipt(
            {
              commandId: "timer:tick-again",
              type: "trigger.tick",
              triggerId: "hourly",
              at: at("2026-06-01T09:00:00Z")
            },
            { origin: "internal" }
          )
        )
        assert.deepStrictEqual([stale._tag, (stale as { reason?: string }).reason], ["CommandRejected", "stale-tick"])
        yield* advanceTo("2026-06-01T10:30:00Z")
        yield* eventually(sendsAre(2), "the 10:00 tick sent")
        yield* advanceTo("2026-06-01T10:59:00Z")
        yield* settle
        assert.deepStrictEqual(yield* tickSends, [
          "inbox trigger:hourly:2026-06-01T09:00:00.000Z accepted",
          "inbox trigger:hourly:2026-06-01T10:00:00.000Z accepted"
        ])
        yield* eventually(allTurnsTerminal("inbox", 2), "both turns done")
        const [trigger] = yield* listTriggers({ limit: 10 })
        assert.deepStrictEqual(
          [trigger!.nextFireAt, trigger!.lastFiredAt, trigger!.lastDelivery],
          [at("2026-06-01T11:00:00Z"), at("2026-06-01T10:00:00Z"), "succeeded"]
        )
        // The thread heard the trigger's text, once per tick.
        const events = yield* engine.readEvents()
        assert.deepStrictEqual(
          events
            .filter((e) => e.aggregateId === "inbox" && (e.type === "turn.started" || e.type === "message.queued"))
            .map((e) => (e.payload as { text: string }).text),
          ["check the queue", "check the queue"]
        )
      })
    )
  )

  it.effect("an edit takes effect from the next tick", () =>
    startingAt(
      "2026-06-01T08:30:00Z",
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(put("put-1", "t", { cron: "0 * * * *", threadId: "inbox", text: "hourly" }))
        yield* advanceTo("2026-06-01T09:05:00Z")
        yield* eventually(sendsAre(1), "the 09:00 tick")
        yield* engine.dispatchWithReceipt(
          put("put-2", "t", { cron: "30 * * * *", threadId: "other", text: "half past" })
        )
        yield* advanceTo("2026-06-01T10:10:00Z")
        yield* eventually(sendsAre(2), "the 09:30 tick")
        yield* settle
        assert.deepStrictEqual(yield* tickSends, [
          "inbox trigger:t:2026-06-01T09:00:00.000Z accepted",
          "other trigger:t:2026-06-01T09:30:00.000Z accepted"
        ])
        const [trigger] = yield* listTriggers({ limit: 10 })
        assert.deepStrictEqual([trigger!.cron, trigger!.nextFireAt], ["30 * * * *", at("2026-06-01T10:30:00Z")])
      })
    )
  )

  it.effect("a delete stops the trigger: no tick after it, and the list no longer shows it", () =>
    startingAt(
      "2026-06-01T08:30:00Z",
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(put("put-1", "t", { cron: "0 * * * *", threadId: "inbox", text: "hourly" }))
        yield* advanceTo("2026-06-01T09:05:00Z")
        yield* eventually(sendsAre(1), "the 09:00 tick")
        yield* engine.dispatchWithReceipt({ commandId: "del-1", type: "trigger.delete", triggerId: "t" })
        yield* advanceTo("2026-06-01T12:05:00Z")
        yield* settle
        assert.deepStrictEqual(yield* tickSends, ["inbox trigger:t:2026-06-01T09:00:00.000Z accepted"])
        assert.deepStrictEqual(yield* listTriggers({ limit: 10 }), [])
        const sql = yield* SqlClient
        const [timer] = yield* sql<{ status: string }>`SELECT status FROM timers WHERE aggregate_type = 'trigger'`
        assert.strictEqual(timer!.status, "cancelled")
      })
    )
  )

  it.effect("deleting the trigger's thread stops it: the next tick's refusal deletes it, and no tick follows", () =>
    startingAt(
      "2026-06-01T08:30:00Z",
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(put("put-1", "t", { cron: "0 * * * *", threadId: "inbox", text: "hourly" }))
        yield* advanceTo("2026-06-01T09:05:00Z")
        yield* eventually(sendsAre(1), "the 09:00 tick")
        yield* eventually(allTurnsTerminal("inbox", 1), "its turn done")
        yield* engine.dispatchWithReceipt({ commandId: "del-inbox", type: "thread.delete", threadId: "inbox" })
        yield* advanceTo("2026-06-01T10:05:00Z")
        yield* eventually(
          Effect.map(listTriggers({ limit: 10 }), (list) => list.length === 0),
          "the trigger stopped"
        )
        yield* advanceTo("2026-06-01T13:05:00Z")
        yield* settle
        // The 10:00 tick was refused (the thread is gone) and none was sent after it.
        assert.deepStrictEqual(yield* tickSends, [
          "inbox trigger:t:2026-06-01T09:00:00.000Z accepted",
          "inbox trigger:t:2026-06-01T10:00:00.000Z rejected"
        ])
        const sql = yield* SqlClient
        const timers = yield* sql<{ status: string }>`SELECT status FROM timers WHERE aggregate_type = 'trigger'`
        assert.deepStrictEqual(
          timers.map((t) => t.status),
          ["cancelled"]
        )
      })
    )
  )

  it.effect("a tick timer a process without triggers marked failed is re-armed by putting the same spec again", () =>
    startingAt(
      "2026-06-01T08:30:00Z",
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const spec = { cron: "0 * * * *", threadId: "inbox", text: "hourly" }
        yield* engine.dispatchWithReceipt(put("put-1", "t", spec))
        // What an older build's timer loop does with a command type it does not know (a rolling deploy).
        const sql = yield* SqlClient
        yield* sql`UPDATE timers SET status = 'failed' WHERE aggregate_type = 'trigger'`
        yield* advanceTo("2026-06-01T09:30:00Z")
        yield* settle
        assert.deepStrictEqual(yield* tickSends, [])
        const again = yield* engine.dispatchWithReceipt(put("put-2", "t", spec))
        assert.deepStrictEqual(again.events, [])
        yield* eventually(sendsAre(1), "the overdue 09:00 tick, once re-armed")
        yield* advanceTo("2026-06-01T10:05:00Z")
        yield* eventually(sendsAre(2), "the 10:00 tick")
        assert.deepStrictEqual(yield* tickSends, [
          "inbox trigger:t:2026-06-01T09:00:00.000Z accepted",
          "inbox trigger:t:2026-06-01T10:00:00.000Z accepted"
        ])
      })
    )
  )

  it.effect("a tick whose stored command is refused is recorded as not fired, and the next tick still comes", () =>
    startingAt(
      "2026-06-01T08:30:00Z",
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(put("put-1", "t", { cron: "0 * * * *", threadId: "inbox", text: "hourly" }))
        // A tick command this build refuses (as one written by a build whose trigger.tick had other fields).
        const sql = yield* SqlClient
        yield* sql`UPDATE timers SET command = '{"triggerId":"t","type":"trigger.tick"}' WHERE aggregate_type = 'trigger'`
        yield* advanceTo("2026-06-01T09:05:00Z")
        yield* settle
        assert.deepStrictEqual(yield* tickSends, [])
        const [trigger] = yield* listTriggers({ limit: 10 })
        assert.deepStrictEqual(
          [trigger!.nextFireAt, trigger!.lastDelivery],
          [at("2026-06-01T10:00:00Z"), "tick-failed"]
        )
        yield* advanceTo("2026-06-01T10:05:00Z")
        yield* eventually(sendsAre(1), "the 10:00 tick")
        assert.deepStrictEqual(yield* tickSends, ["inbox trigger:t:2026-06-01T10:00:00.000Z accepted"])
        const failed = (yield* engine.readEvents()).filter((e) => e.type === "trigger.tick-failed")
        assert.deepStrictEqual(
          failed.map((e) => {
            const p = e.payload as { at: number; reason: string; nextAt: number }
            return [p.at, p.reason, p.nextAt]
          }),
          [[at("2026-06-01T09:00:00Z"), "invalid-command", at("2026-06-01T10:00:00Z")]]
        )
      })
    )
  )

  it.effect("0 2 * * * in America/New_York fires at 02:00 local time across the spring-forward switch", () =>
    startingAt(
      "2026-03-06T12:00:00Z",
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(
          put("put-1", "nightly", { cron: "0 2 * * *", timezone: "America/New_York", threadId: "ny", text: "2am" })
        )
        // Ten-minute moves: a fire woken inside one lands a little late, under its scheduled time's id.
        yield* advanceTo("2026-03-09T12:00:00Z", 600_000)
        yield* eventually(sendsAre(3), "three nights")
        yield* settle
        // 02:00 EST = 07:00Z; on 2026-03-08 02:00 does not exist and the tick is 03:00 EDT (07:00Z);
        // from then on 02:00 EDT = 06:00Z.
        assert.deepStrictEqual(yield* tickSends, [
          "ny trigger:nightly:2026-03-07T07:00:00.000Z accepted",
          "ny trigger:nightly:2026-03-08T07:00:00.000Z accepted",
          "ny trigger:nightly:2026-03-09T06:00:00.000Z accepted"
        ])
        const [trigger] = yield* listTriggers({ limit: 10 })
        assert.strictEqual(trigger!.nextFireAt, at("2026-03-10T06:00:00Z"))
      })
    )
  )

  it.effect("30 2 * * * in Europe/Berlin fires once on the fall-back night, when 02:30 happens twice", () =>
    startingAt(
      "2026-10-24T12:00:00Z",
      Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(
          put("put-1", "berlin", { cron: "30 2 * * *", timezone: "Europe/Berlin", threadId: "b", text: "halb drei" })
        )
        yield* advanceTo("2026-10-26T12:00:00Z", 600_000)
        yield* eventually(sendsAre(2), "two nights")
        yield* settle
        assert.deepStrictEqual(yield* tickSends, [
          "b trigger:berlin:2026-10-25T00:30:00.000Z accepted",
          "b trigger:berlin:2026-10-26T01:30:00.000Z accepted"
        ])
      })
    )
  )

  it.effect("after downtime spanning several ticks, the trigger fires once at boot and goes on from now", () => {
    const dir = tempDir()
    return Effect.gen(function* () {
      yield* startingAt(
        "2026-06-01T08:30:00Z",
        Effect.gen(function* () {
          const engine = yield* Engine.Engine
          yield* engine.dispatchWithReceipt(put("put-1", "t", { cron: "0 * * * *", threadId: "inbox", text: "hourly" }))
        }),
        dir
      )
      // Down from 08:30 to 13:20: the 09:00 … 13:00 ticks (five) are all missed.
      yield* startingAt(
        "2026-06-01T13:20:00Z",
        Effect.gen(function* () {
          yield* eventually(sendsAre(1), "the overdue tick, at boot")
          yield* advanceTo("2026-06-01T13:59:00Z")
          yield* settle
          assert.deepStrictEqual(yield* tickSends, ["inbox trigger:t:2026-06-01T09:00:00.000Z accepted"])
          const [trigger] = yield* listTriggers({ limit: 10 })
          assert.strictEqual(trigger!.nextFireAt, at("2026-06-01T14:00:00Z"))
          yield* advanceTo("2026-06-01T14:01:00Z")
          yield* eventually(sendsAre(2), "the 14:00 tick")
        }),
        dir
      )
      // A third boot sends nothing again.
      yield* startingAt(
        "2026-06-01T14:30:00Z",
        Effect.gen(function* () {
          yield* settle
          assert.deepStrictEqual(yield* tickSends, [
            "inbox trigger:t:2026-06-01T09:00:00.000Z accepted",
            "inbox trigger:t:2026-06-01T14:00:00.000Z accepted"
          ])
        }),
        dir
      )
    })
  })

  it.effect(
    "the model's trigger_edit puts a trigger that fires; a bad cron is refused to the model; spec null deletes",
    () =>
      startingAt(
        "2026-06-01T08:30:00Z",
        Effect.gen(function* () {
          const engine = yield* Engine.Engine
          const world = yield* World
          const text = script(
            {
              toolCalls: [
                {
                  name: "trigger_edit",
                  arguments: { triggerId: "bad", spec: { cron: "0 25 * * *", threadId: "x", text: "y" } }
                },
                {
                  name: "trigger_edit",
                  arguments: {
                    triggerId: "standup",
                    spec: { cron: "45 8 * * 1-5", timezone: "Europe/Berlin", threadId: "team", text: "standup time" }
                  }
                }
              ]
            },
            { text: "scheduled" }
          )
          yield* engine.dispatchWithReceipt(send("chat", "m1", text))
          yield* eventually(allTurnsTerminal("chat", 1), "the scheduling turn")
          const calls = (yield* threadView("chat"))!.turns[0]!.toolCalls
          assert.deepStrictEqual(
            calls.map((c) => [c.name, c.status]),
            [
              ["trigger_edit", "failed"],
              ["trigger_edit", "succeeded"]
            ]
          )
          assert.match(String(calls[0]!.result), /trigger_edit refused: cron '0 25 \* \* \*' is not valid/)
          // 08:45 in Berlin (CEST, +2) is 06:45Z: the next is the following weekday morning, 2026-06-02.
          assert.deepStrictEqual(JSON.parse(String(calls[1]!.result)), {
            triggerId: "standup",
            path: "triggers/standup.json",
            deleted: false,
            nextFireAt: "2026-06-02T06:45:00.000Z"
          })
          assert.deepStrictEqual(yield* world.readTrigger("standup"), {
            cron: "45 8 * * 1-5",
            timezone: "Europe/Berlin",
            threadId: "team",
            text: "standup time"
          })
          assert.deepStrictEqual(
            (yield* listTriggers({ limit: 10 })).map((t) => t.triggerId),
            ["standup"]
          )
          yield* advanceTo("2026-06-02T07:00:00Z", 600_000)
          yield* eventually(sendsAre(1), "the standup tick")
          assert.deepStrictEqual(yield* tickSends, ["team trigger:standup:2026-06-02T06:45:00.000Z accepted"])
          const remove = script(
            { toolCalls: [{ name: "trigger_edit", arguments: { triggerId: "standup", spec: null } }] },
            { text: "removed" }
          )
          yield* engine.dispatchWithReceipt(send("chat", "m2", remove))
          yield* eventually(allTurnsTerminal("chat", 2), "the removing turn")
          assert.deepStrictEqual(yield* listTriggers({ limit: 10 }), [])
          yield* advanceTo("2026-06-04T07:00:00Z", 600_000)
          yield* settle
          assert.strictEqual((yield* tickSends).length, 1)
        })
      )
  )
})
