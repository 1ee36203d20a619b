import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { postJson, raw, startServer } from "./fixtures/server.js"
import { openAccount as open } from "./fixtures/AccountsDomain.js"

const deposit = (id: string, accountId: string, amount: number) => ({
  commandId: id,
  type: "account.deposit",
  accountId,
  amount
})

/** Reads an SSE response until `count` events arrived, then aborts (a client going away). */
const readEvents = (url: string, path: string, count: number, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const abort = new AbortController()
    const response = await fetch(`${url}${path}`, { headers, signal: abort.signal })
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    let buffer = ""
    const events: Array<{ id: number; event: string; data: any }> = []
    const comments: Array<string> = []
    while (events.length < count) {
      const { value, done } = await reader.read()
      if (done) break
      buffer += decoder.decode(value, { stream: true })
      let end: number
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        if (block.startsWith(":")) {
          comments.push(block)
          continue
        }
        const fields = Object.fromEntries(
          block.split("\n").map((line) => [line.slice(0, line.indexOf(":")), line.slice(line.indexOf(":") + 2)])
        )
        events.push({ id: Number(fields.id), event: fields.event!, data: JSON.parse(fields.data!) })
      }
    }
    abort.abort()
    return { status: response.status, contentType: response.headers.get("content-type"), events, comments }
  })

describe("GET /v1/events", () => {
  it.scopedLive("pages the log with after, limit and aggregateId; next is the last sequence, or after when none", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      yield* postJson(url, "/v1/commands", open("o-1", "acc-1"))
      yield* postJson(url, "/v1/commands", open("o-2", "acc-2"))
      yield* postJson(url, "/v1/commands", deposit("d-1", "acc-1", 10))
      const page = yield* raw(url, "/v1/events?limit=2")
      assert.deepStrictEqual(
        page.body.events.map((e: any) => e.sequence),
        [1, 2]
      )
      assert.strictEqual(page.body.next, 2)
      assert.deepStrictEqual(Object.keys(page.body.events[0]).sort(), [
        "aggregateId",
        "aggregateType",
        "commandId",
        "eventId",
        "occurredAt",
        "payload",
        "sequence",
        "type",
        "version"
      ])
      const rest = yield* raw(url, `/v1/events?after=${page.body.next}`)
      assert.deepStrictEqual(
        rest.body.events.map((e: any) => e.type),
        ["account.deposited"]
      )
      const byAggregate = yield* raw(url, "/v1/events?aggregateId=acc-1")
      assert.deepStrictEqual(
        byAggregate.body.events.map((e: any) => e.sequence),
        [1, 3]
      )
      const none = yield* raw(url, "/v1/events?after=3")
      assert.deepStrictEqual(none.body, { events: [], next: 3 })
    })
  )

  it.scopedLive("a limit over 1000 or a negative after is 400 InvalidRequest with issues", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      const tooMany = yield* raw(url, "/v1/events?limit=1001")
      assert.strictEqual(tooMany.status, 400)
      assert.strictEqual(tooMany.body.error, "InvalidRequest")
      assert.deepStrictEqual(tooMany.body.issues[0].path, ["limit"])
      const negative = yield* raw(url, "/v1/events?after=-1")
      assert.strictEqual(negative.status, 400)
      assert.strictEqual(negative.body.error, "InvalidRequest")
    })
  )
})

describe("GET /v1/events/stream", () => {
  it.scopedLive("a client that disconnects and reconnects with Last-Event-ID receives every event exactly once", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      yield* postJson(url, "/v1/commands", open("o-1", "acc-1"))
      yield* postJson(url, "/v1/commands", deposit("d-1", "acc-1", 1))
      const first = yield* readEvents(url, "/v1/events/stream", 2)
      assert.strictEqual(first.status, 200)
      assert.strictEqual(first.contentType, "text/event-stream")
      assert.deepStrictEqual(first.comments, [": connected"])
      // While the client is away, more events commit.
      for (let i = 2; i <= 6; i++) yield* postJson(url, "/v1/commands", deposit(`d-${i}`, "acc-1", i))
      const lastSeen = first.events.at(-1)!.id
      // An event committing while the client reconnects arrives once, whichever side of the
      // catch-up it lands on.
      const second = yield* Effect.fork(readEvents(url, "/v1/events/stream", 6, { "last-event-id": String(lastSeen) }))
      yield* postJson(url, "/v1/commands", deposit("d-7", "acc-1", 7))
      const resumed = yield* Fiber.join(second)
      const ids = [...first.events, ...resumed.events].map((e) => e.id)
      assert.deepStrictEqual(ids, [1, 2, 3, 4, 5, 6, 7, 8])
      assert.strictEqual(resumed.events.at(-1)!.event, "account.deposited")
      assert.strictEqual(resumed.events.at(-1)!.data.commandId, "d-7")
    })
  )

  it.scopedLive("?after= starts after a sequence; Last-Event-ID wins over it; a malformed Last-Event-ID is 400", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      for (let i = 1; i <= 3; i++) yield* postJson(url, "/v1/commands", open(`o-${i}`, `acc-${i}`))
      const after = yield* readEvents(url, "/v1/events/stream?after=1", 2)
      assert.deepStrictEqual(
        after.events.map((e) => e.id),
        [2, 3]
      )
      const header = yield* readEvents(url, "/v1/events/stream?after=1", 1, { "last-event-id": "2" })
      assert.deepStrictEqual(
        header.events.map((e) => e.id),
        [3]
      )
      const bad = yield* raw(url, "/v1/events/stream", { headers: { "last-event-id": "abc" } })
      assert.strictEqual(bad.status, 400)
      assert.strictEqual(bad.body.error, "InvalidRequest")
    })
  )
})
