import { assert, describe, it } from "@effect/vitest"
import type { EventRecord } from "@orchestration/engine"
import { transition } from "../src/AgentsStreamSteps.js"
import { formatPosition, parsePosition, requestedPosition } from "../src/ThreadStream.js"

const event = (type: string, payload: unknown): EventRecord =>
  ({
    sequence: 1,
    eventId: "e",
    aggregateType: "thread",
    aggregateId: "t",
    version: 1,
    type,
    payload,
    commandId: "c",
    occurredAt: 0
  }) as EventRecord

describe("thread stream positions", () => {
  it("a position round-trips through its id, the turn id last (it may hold ':')", () => {
    for (const position of [
      { seq: 0, live: null },
      { seq: 42, live: null },
      { seq: 7, live: { turnId: "t1:m.1", step: 3, attempt: 2, end: 120 } }
    ]) {
      assert.deepStrictEqual(parsePosition(formatPosition(position)), position)
    }
    assert.strictEqual(formatPosition({ seq: 7, live: { turnId: "t:m", step: 1, attempt: 0, end: 0 } }), "7:1:0:0:t:m")
  })

  it("malformed ids are problems, Last-Event-ID wins over ?after=, none is the start", () => {
    for (const bad of ["x", "-1", "1:2", "1:0:0:0:t", "1:1:1:1:", "01", "1.5"]) {
      assert.isTrue("problem" in parsePosition(bad), bad)
    }
    assert.deepStrictEqual(requestedPosition(undefined, undefined), { seq: 0, live: null })
    assert.deepStrictEqual(requestedPosition("5", "3"), { seq: 5, live: null })
    assert.deepStrictEqual(requestedPosition(undefined, "3"), { seq: 3, live: null })
    assert.strictEqual((requestedPosition("nope", undefined) as { path: string }).path, "Last-Event-ID")
  })
})

describe("the agents thread's live step", () => {
  it("turn.started makes step 1 live; a response with tools closes it and makes the next live; the end closes all", () => {
    assert.deepStrictEqual(
      transition(null, event("turn.started", { turnId: "t:m", ordinal: 1, messageId: "m", text: "" })),
      {
        next: { turnId: "t:m", step: 1 }
      }
    )
    const live = { turnId: "t:m", step: 1 }
    assert.deepStrictEqual(
      transition(live, event("model.responded", { turnId: "t:m", step: 1, text: "", toolCalls: [{}] })),
      {
        close: { status: "completed" },
        next: { turnId: "t:m", step: 2 }
      }
    )
    assert.deepStrictEqual(transition(live, event("turn.completed", { turnId: "t:m", steps: 1, text: "" })), {
      close: { status: "completed" },
      next: null
    })
    assert.deepStrictEqual(
      transition(live, event("turn.ended", { turnId: "t:m", status: "interrupted", reason: "stop", synthetic: [] })),
      { close: { status: "interrupted", reason: "stop" }, next: null }
    )
    assert.strictEqual(transition(live, event("tool.result", { turnId: "t:m" })), undefined)
    assert.strictEqual(
      transition(live, event("message.queued", { messageId: "m2", turnId: "t:m2", text: "" })),
      undefined
    )
  })
})
