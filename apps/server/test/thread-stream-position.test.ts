import { assert, describe, it } from "@effect/vitest"
import type { EventRecord } from "@orchestration/engine"
import { Effect, Layer, Option } from "effect"
import { transition } from "../src/AgentsStreamSteps.js"
import * as ServerDomain from "../src/ServerDomain.js"
import { formatPosition, parsePosition, requestedPosition } from "../src/ThreadStream.js"
import { ThreadViews } from "../src/ThreadViews.js"
import { domain as accounts } from "./fixtures/AccountsDomain.js"
import { postJson, startServer } from "./fixtures/server.js"

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

/**
 * Turn ids no turn has, each echoed in every `id:` line if taken: a line break (which would frame the
 * client's text as an SSE message of its own), a control character, non-ASCII, and an unbounded length.
 */
const forgedTurnIds = [
  '0:1:0:0:x\n\nevent: forged\ndata: {"injected":true}',
  "0:1:0:0:x\ry",
  "0:1:0:0:x\u0000y",
  "0:1:0:0:t\u00e9",
  `0:1:0:0:${"t".repeat(600)}`
]

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
    for (const bad of ["x", "-1", "1:2", "1:0:0:0:t", "1:1:1:1:", "01", "1.5", ...forgedTurnIds]) {
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

/** Accounts as threads: an account's events are its thread's (no model steps). */
const accountThreads = ServerDomain.make({
  ...accounts,
  threads: () =>
    Layer.succeed(ThreadViews, {
      getThread: (id: string) => Effect.succeed(Option.some({ threadId: id } as never)),
      getTranscript: () => Effect.succeed(Option.none()),
      streamRules: {
        aggregateType: "account",
        transition: () => undefined,
        stepEffectId: (step) => `${step.turnId}#${step.step}`
      }
    })
})

/** The first `ms` milliseconds of a response's text. */
const firstText = (url: string, path: string, ms: number) =>
  Effect.promise(async () => {
    const abort = new AbortController()
    const response = await fetch(`${url}${path}`, { signal: abort.signal })
    let text = ""
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    const timer = setTimeout(() => abort.abort(), ms)
    try {
      while (true) {
        const { value, done } = await reader.read()
        if (done) break
        text += decoder.decode(value, { stream: true })
      }
    } catch {
      // swallow-ok: aborted, the stream never ends by itself
    }
    clearTimeout(timer)
    return { status: response.status, text }
  })

describe("a thread stream position with a line break in its turn id", () => {
  it.scopedLive("is a 400 InvalidRequest (it was echoed into the id: line, forging a whole SSE message)", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ domain: accountThreads })
      yield* postJson(url, "/v1/commands", { commandId: "c-1", type: "account.open", accountId: "t1", owner: "ada" })
      const forged = '0:1:0:0:x\n\nevent: forged\ndata: {"injected":true}'
      const answer = yield* firstText(url, `/v1/threads/t1/stream?after=${encodeURIComponent(forged)}`, 1_500)
      assert.notInclude(answer.text, "event: forged", answer.text.slice(0, 300))
      assert.strictEqual(answer.status, 400, answer.text.slice(0, 300))
    })
  )
})
