/**
 * The close of an interrupted step is held until its performer says its handler stopped (it may
 * still flush its buffered tail). That word is a plain row update, not a command: the reactor rings
 * the thread's hint with it, so a reader following the thread sends the close at once instead of
 * polling for the row. TestClock: the clock does not move after the interrupt, so neither a poll nor
 * the lease's end can deliver the close; only the ring can.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Agents, Thread } from "@orchestration/agents"
import { Boot, Engine, Outbox } from "@orchestration/engine"
import { TestStore } from "@orchestration/engine/testing"
import { Effect, Fiber, Layer, Stream, TestClock } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { rules } from "../src/AgentsStreamSteps.js"
import * as ThreadStream from "../src/ThreadStream.js"

const stack = () => {
  const dir = mkdtempSync(join(tmpdir(), "thread-stream-stop-"))
  const domain = Agents.domain()
  return Boot.layer({ reactors: domain.reactors, retention: false, worker: { nodeId: "test" } }).pipe(
    Layer.provideMerge(
      Layer.merge(
        Engine.layer({ aggregates: domain.aggregates, projections: domain.projections, activation: "manual" }),
        Agents.services({ worldDir: join(dir, "world") })
      )
    ),
    Layer.provideMerge(TestStore.layer({ filename: join(dir, "engine.db") }))
  )
}

/** Lets other fibers (and file I/O) run until `condition` holds; dies instead of hanging. The clock does not move. */
const eventually = <E, R>(what: string, condition: Effect.Effect<boolean, E, R>) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 20_000
    while (Date.now() < deadline) {
      if (yield* condition) return
      yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
    }
    return yield* Effect.dieMessage(`never happened: ${what}`)
  })

describe("a thread's reader and an interrupted step", () => {
  it.scoped("sees the interrupted close as soon as the performer says it stopped, with no poll", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const sql = yield* SqlClient
      const seen: Array<ThreadStream.StreamMessage> = []
      const reader = yield* ThreadStream.follow({ engine, sql, rules, threadId: "ts", from: ThreadStream.start }).pipe(
        Stream.runForEach((message) => Effect.sync(() => seen.push(message))),
        Effect.fork
      )
      const pieces = Array.from({ length: 20 }, (_, i) => `p${i} `)
      yield* engine.dispatchWithReceipt({
        commandId: "send-ts-m1",
        type: "message.send",
        threadId: "ts",
        messageId: "m1",
        text: JSON.stringify({ script: [{ chunks: pieces, chunkDelayMs: 10 }] })
      })
      const effectId = Thread.stepEffectId("ts:m1", 1)
      yield* eventually(
        "the step runs",
        Effect.map(Outbox.find(effectId), (row) => row?.status === "running")
      )
      // Pieces 0-5 are sent by start + 65 ms; the flush window at 50 ms has landed some of them.
      for (const step of ["5 millis", "50 millis", "10 millis"] as const) {
        yield* TestClock.adjust(step)
        yield* eventually("the pieces due", Effect.succeed(true))
      }
      yield* eventually(
        "a delta",
        Effect.sync(() => seen.some((m) => m.kind === "delta"))
      )
      yield* engine.dispatchWithReceipt({
        commandId: "interrupt-ts",
        type: "turn.interrupt",
        threadId: "ts",
        turnId: "ts:m1"
      })
      yield* eventually(
        "stop acknowledged",
        Effect.map(Outbox.find(effectId), (row) => row?.status === "cancelled" && row.leaseOwner === null)
      )
      // The clock has not moved since: only the acknowledgement's ring can have woken the reader.
      yield* eventually(
        "the interrupted notice and turn.ended",
        Effect.sync(() => seen.some((m) => m.kind === "thread-event" && m.data.type === "turn.ended"))
      )
      const kinds = seen.map((m) => (m.kind === "thread-event" ? m.data.type : m.kind))
      const notice = seen.find((m) => m.kind === "interrupted")
      assert.isDefined(notice, kinds.join(","))
      assert.strictEqual(kinds[kinds.indexOf("interrupted") + 1], "turn.ended")
      const text = seen.flatMap((m) => (m.kind === "delta" ? [m.data.text] : [])).join("")
      const recorded = (yield* engine.readStreamChunks(effectId)).map((c) => c.text).join("")
      // The notice counts the whole partial text, the tail flushed as the step stopped included.
      assert.strictEqual(text, recorded)
      assert.strictEqual((notice!.data as ThreadStream.PartialView).length, recorded.length)
      assert.isTrue(pieces.join("").startsWith(recorded) && recorded.length > 0, recorded)
      yield* Fiber.interrupt(reader)
    }).pipe(Effect.provide(stack()))
  )
})
