import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Engine, Outbox } from "@orchestration/engine"
import { Effect, Layer, Logger, TestClock } from "effect"
import { threadView, transcriptView } from "../src/ThreadReadModel.js"
import { World } from "../src/World.js"
import {
  advanceUntil,
  agentsStack,
  allTurnsTerminal,
  eventually,
  processesWith,
  script,
  send,
  waitFor
} from "./fixtures/agents.js"

/**
 * The effect ids whose outcome the store refused, from the settler's error log: nothing is stored
 * when the disk is full, so the log line is the only sign that the refusal has happened.
 */
const refusedOutcomes = () => {
  const effectIds: Array<string> = []
  const layer = Logger.add(
    Logger.make(({ message }) => {
      const [text, fields] = Array.isArray(message) ? message : [message]
      if (typeof text === "string" && text.startsWith("the store refused this effect's outcome")) {
        effectIds.push(String((fields as { effectId?: unknown } | undefined)?.effectId))
      }
    })
  )
  return { effectIds, layer }
}

const performedNotRecorded =
  "storage: SQLITE_FULL; the effect was performed (succeeded), but the store refused its outcome"

describe("the 2026-09-10 scenario: recording a tool result fails with SQLITE_FULL", () => {
  it.effect(
    "the failure to record becomes the call's one result, the turn fails visibly, the thread then serves a new turn",
    () => {
      const refused = refusedOutcomes()
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        const world = yield* World
        const sql = yield* SqlClient
        // The tool's output is large (the 64 KiB kept of each stream): recording it needs pages the full disk will not give.
        const command = "sleep 1; head -c 90000 /dev/zero | tr '\\0' x; head -c 90000 /dev/zero | tr '\\0' y >&2"
        yield* engine.dispatchWithReceipt(
          send("t1", "m1", script({ toolCalls: [{ name: "execute", arguments: { command } }] }, { text: "never" }))
        )
        yield* waitFor(
          Effect.map(Outbox.find("tool:t1:m1:call_1_0"), (r) => r?.status === "running"),
          "execute running"
        )
        const [pages] = yield* sql<{ page_count: number }>`PRAGMA page_count`
        yield* sql.unsafe(`PRAGMA max_page_count = ${Number(pages!.page_count)}`)
        // The command finishes while the disk is full (real time: the TestClock does not move a process).
        yield* waitFor(
          Effect.map(world.readExecutions, (runs) => runs.length === 1),
          "execute started"
        )
        yield* waitFor(
          Effect.sync(() => processesWith("/bin/sh", "-c", command).length === 0),
          "command finished"
        )
        // The result reaches the store after the process has ended, a moment later on a loaded machine:
        // space returning before that moment would let the result be recorded (CI saw it once).
        yield* waitFor(
          Effect.sync(() => refused.effectIds.includes("tool:t1:m1:call_1_0")),
          "the store refused the result"
        )
        // The disk stays full for a while: the turn never reads as completed, the call never as succeeded.
        for (let i = 0; i < 5; i++) {
          yield* TestClock.adjust("1 second")
          yield* eventually(Effect.succeed(true), "tick", 50)
          const view = (yield* threadView("t1"))!
          assert.notStrictEqual(view.turns[0]!.status, "completed")
          assert.notStrictEqual((yield* Outbox.find("tool:t1:m1:call_1_0"))!.status, "succeeded")
        }
        yield* sql.unsafe("PRAGMA max_page_count = 1073741823")
        yield* advanceUntil(allTurnsTerminal("t1", 1), "turn ended")
        const view = (yield* threadView("t1"))!
        assert.deepStrictEqual(
          view.turns.map((t) => [t.status, t.reason]),
          // execute is process-bound: the reason says the command ran (a model must not run it again).
          [["failed", performedNotRecorded]]
        )
        assert.deepStrictEqual(
          view.turns[0]!.toolCalls.map((c) => [c.status, c.result]),
          [["failed", `error: ${performedNotRecorded}`]]
        )
        const transcript = (yield* transcriptView("t1"))!
        assert.isTrue(transcript.valid, JSON.stringify(transcript.problems))
        const results = transcript.messages.filter((m) => m.role === "tool")
        assert.deepStrictEqual(
          results.map((m) => m.content),
          [`error: ${performedNotRecorded}`]
        )
        // Space is back: the next message's turn completes without a restart.
        yield* engine.dispatchWithReceipt(send("t1", "m2", "are you there?"))
        yield* advanceUntil(allTurnsTerminal("t1", 2), "second turn")
        assert.deepStrictEqual(
          (yield* threadView("t1"))!.turns.map((t) => t.status),
          ["failed", "completed"]
        )
        assert.isTrue((yield* transcriptView("t1"))!.valid)
      }).pipe(Effect.provide(agentsStack().pipe(Layer.provide(refused.layer))))
    }
  )
})
