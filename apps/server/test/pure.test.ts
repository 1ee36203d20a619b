import { assert, describe, it } from "@effect/vitest"
import type { EventRecord } from "@orchestration/engine"
import { Chunk, Deferred, Effect, Fiber, Stream, TestClock } from "effect"
import { statusOf } from "../src/Health.js"
import { formatEvent, eventStream, heartbeatLine, parseLastEventId, sseResponse } from "../src/http/Sse.js"
import * as Metrics from "../src/Metrics.js"
import { fromDispatchError } from "../src/ApiErrors.js"
import { closedResponse } from "../src/ListenerGate.js"
import { EngineUnavailable, StorageFailure } from "@orchestration/engine"

const record = (sequence: number): EventRecord => ({
  sequence,
  eventId: `e-${sequence}`,
  aggregateType: "account",
  aggregateId: "a",
  version: sequence,
  type: "account.deposited",
  payload: { type: "account.deposited", amount: 1 },
  commandId: `c-${sequence}`,
  occurredAt: 0,
  schemaVersion: 1
})

describe("Server-Sent Events framing", () => {
  it.effect("a stream that dies ends with an error event, as one that fails does, not silently", () =>
    Effect.gen(function* () {
      const draining = yield* Deferred.make<void>()
      // given an event stream whose read dies after one message (a bug, not a storage failure)
      const text = Stream.concat(Stream.make("id: 1\n\n"), Stream.dieMessage("bug in a read"))
      // when its response is written
      const response = sseResponse(text as Stream.Stream<string, { readonly message: string }>, {
        what: "test stream",
        draining
      })
      const body = response.body
      if (body._tag !== "Stream") return assert.fail(`a stream body, got ${body._tag}`)
      const bytes = yield* Stream.runCollect(body.stream)
      const written = Chunk.toReadonlyArray(bytes)
        .map((chunk) => new TextDecoder().decode(chunk))
        .join("")
      // then the client is told, and reconnects with Last-Event-ID (nothing of the stream is lost)
      assert.include(written, "id: 1\n\n")
      assert.match(written, /event: error\ndata: \{"error":"StreamFailed","message":"[^"]+"\}\n\n$/)
    })
  )

  it.effect("a stream ended by damage says StorageCorrupt; one ended by a refused read says StorageUnavailable", () =>
    Effect.gen(function* () {
      const draining = yield* Deferred.make<void>()
      const endedBy = (failure: StorageFailure) =>
        Effect.gen(function* () {
          // given an event stream whose read fails after one message
          const text = Stream.concat(Stream.make("id: 1\n\n"), Stream.fail(failure))
          // when its response is written
          const body = sseResponse(text, { what: "test stream", draining }).body
          if (body._tag !== "Stream") return assert.fail(`a stream body, got ${body._tag}`)
          const written = Chunk.toReadonlyArray(yield* Stream.runCollect(body.stream))
            .map((chunk) => new TextDecoder().decode(chunk))
            .join("")
          assert.include(written, "id: 1\n\n")
          const last = /event: error\ndata: (.*)\n\n$/.exec(written)
          if (last === null) return assert.fail(`an error event last, got ${written}`)
          return JSON.parse(last[1]!) as { error: string; message: string }
        })
      // then damage is told as such (reconnecting reads the same bytes); a refused read as a retry
      const damaged = yield* endedBy(
        new StorageFailure({ reason: "corrupt", code: "SQLITE_CORRUPT", message: "damaged", operation: "read" })
      )
      assert.deepStrictEqual(damaged, { error: "StorageCorrupt", message: "damaged" })
      const refused = yield* endedBy(
        new StorageFailure({ reason: "io-error", code: "SQLITE_IOERR", message: "refused", operation: "read" })
      )
      assert.deepStrictEqual(refused, { error: "StorageUnavailable", message: "refused" })
    })
  )

  it("an event is id, event and one data line of JSON", () => {
    assert.strictEqual(
      formatEvent(record(7)),
      'id: 7\nevent: account.deposited\ndata: {"sequence":7,"eventId":"e-7","aggregateType":"account","aggregateId":"a","version":7,"type":"account.deposited","payload":{"type":"account.deposited","amount":1},"commandId":"c-7","occurredAt":0}\n\n'
    )
  })

  it.effect("an idle stream sends a comment line every 15 seconds, and nothing before", () =>
    Effect.gen(function* () {
      const idle = Stream.concat(Stream.make(record(1)), Stream.never)
      const fiber = yield* Effect.fork(Stream.runCollect(Stream.take(eventStream(idle, "15 seconds"), 4)))
      yield* TestClock.adjust("14 seconds")
      assert.isNull(fiber.unsafePoll())
      yield* TestClock.adjust("16 seconds")
      const out = Chunk.toReadonlyArray(yield* Fiber.join(fiber))
      assert.deepStrictEqual(out, [": connected\n\n", formatEvent(record(1)), heartbeatLine, heartbeatLine])
    })
  )

  it("Last-Event-ID: absent, a sequence, or a problem", () => {
    assert.strictEqual(parseLastEventId(undefined), undefined)
    assert.strictEqual(parseLastEventId(" 42 "), 42)
    assert.deepStrictEqual(parseLastEventId("4x"), {
      problem: "Last-Event-ID must be an event sequence (a whole number in decimal digits), got '4x'"
    })
  })
})

describe("health status", () => {
  const facts = {
    active: true,
    belowFloor: false,
    writable: true,
    freeBytes: 1000,
    floorBytes: 100,
    oldestPendingAgeMs: 0,
    quarantined: 0
  }
  it("ok, degraded when work waits over a minute or space nears the floor, unavailable when new work is refused", () => {
    assert.strictEqual(statusOf(facts), "ok")
    assert.strictEqual(statusOf({ ...facts, oldestPendingAgeMs: 61_000 }), "degraded")
    assert.strictEqual(statusOf({ ...facts, oldestWriterMs: 29_000 }), "ok")
    assert.strictEqual(statusOf({ ...facts, oldestWriterMs: 31_000 }), "degraded")
    assert.strictEqual(statusOf({ ...facts, freeBytes: 150 }), "degraded")
    assert.strictEqual(statusOf({ ...facts, belowFloor: true }), "unavailable")
    assert.strictEqual(statusOf({ ...facts, writable: false }), "unavailable")
    assert.strictEqual(statusOf({ ...facts, active: false }), "unavailable")
  })

  it("degraded while any effect is quarantined: it waits for an operator", () => {
    assert.strictEqual(statusOf({ ...facts, quarantined: 1 }), "degraded")
    assert.strictEqual(statusOf({ ...facts, quarantined: 1, writable: false }), "unavailable")
  })
})

describe("the listener gate", () => {
  const bodyOf = (response: ReturnType<typeof closedResponse>) =>
    response.body._tag === "Uint8Array" ? JSON.parse(new TextDecoder().decode(response.body.body)) : undefined
  it("before the routes serve, every path is 503 Starting and /health is starting; after them, shutting-down and stopping", () => {
    for (const [phase, path, body] of [
      ["starting", "/health", { status: "starting" }],
      ["starting", "/v1/commands", { error: "Starting" }],
      ["starting", "/", { error: "Starting" }],
      ["stopping", "/health", { status: "stopping" }],
      ["stopping", "/v1/threads", { error: "EngineUnavailable", reason: "shutting-down" }]
    ] as const) {
      const response = closedResponse(phase, path)
      assert.strictEqual(response.status, 503)
      assert.strictEqual(response.headers["retry-after"], "1")
      assert.deepInclude(bodyOf(response), body, `${phase} ${path}`)
    }
  })
})

describe("engine failures at the edge", () => {
  it("storage failures and the floor become StorageUnavailable, damage StorageCorrupt; other unavailability stays EngineUnavailable", () => {
    const disk = fromDispatchError(
      new StorageFailure({ reason: "disk-full", code: "SQLITE_FULL", message: "full", operation: "commit" })
    )
    assert.strictEqual(disk._tag, "StorageUnavailable")
    assert.strictEqual((disk as { reason: string }).reason, "disk-full")
    const floor = fromDispatchError(new EngineUnavailable({ reason: "storage-below-floor", message: "low" }))
    assert.deepStrictEqual([floor._tag, (floor as { reason: string }).reason], ["StorageUnavailable", "below-floor"])
    // Damage is no outage: a 500 naming its code; a row's damage and the store's file's told apart.
    const row = fromDispatchError(
      new StorageFailure({ reason: "corrupt", code: "RECEIPT_UNREADABLE", message: "cut", operation: "read receipt" })
    )
    assert.deepStrictEqual([row._tag, (row as { scope?: string }).scope], ["StorageCorrupt", "row"])
    const file = fromDispatchError(
      new StorageFailure({ reason: "corrupt", code: "SQLITE_CORRUPT", message: "malformed", operation: "commit" })
    )
    assert.deepStrictEqual([file._tag, (file as { scope?: string }).scope], ["StorageCorrupt", "store"])
    const overloaded = fromDispatchError(new EngineUnavailable({ reason: "overloaded", message: "full queue" }))
    assert.deepStrictEqual(
      [overloaded._tag, (overloaded as { reason: string }).reason],
      ["EngineUnavailable", "overloaded"]
    )
  })
})

describe("metrics", () => {
  it.effect("the histogram is cumulative and outcomes are counted by the answer", () =>
    Effect.gen(function* () {
      const metrics = Metrics.make()
      yield* metrics.observeDispatch("accepted", 0.002)
      yield* metrics.observeDispatch("StorageUnavailable", 0.2)
      const text = Metrics.render(yield* metrics.snapshot, {
        outboxRows: [{ status: "pending", kind: "email.send", count: 3 }],
        reactors: [{ name: "email", lag: 3, oldestPendingAgeMs: 1500 }],
        reconciledAtBoot: { requeued: 1, failed: 2, alreadySettled: 0, quarantined: 0 },
        leaseReclaims: 4,
        head: 9,
        queueDepth: 0
      })
      assert.include(text, 'orchestration_dispatch_seconds_bucket{le="0.0025"} 1')
      assert.include(text, 'orchestration_dispatch_seconds_bucket{le="0.25"} 2')
      assert.include(text, 'orchestration_dispatch_seconds_bucket{le="+Inf"} 2')
      assert.include(text, 'orchestration_commands_total{outcome="StorageUnavailable"} 1')
      assert.include(text, 'orchestration_outbox_rows{status="pending",kind="email.send"} 3')
      assert.include(text, 'orchestration_reactor_oldest_pending_age_seconds{reactor="email"} 1.5')
      assert.include(text, "orchestration_lease_reclaims_total 4")
      assert.include(text, 'orchestration_reconciled_at_boot{result="failed"} 2')
    })
  )
})
