/**
 * GET /v1/threads/:threadId/stream over a real HTTP server and a real SQLite file: the model step
 * streams from a provider the test feeds part by part (fixtures/heldProvider), and the agents reactor
 * records its text through the engine's StreamIngest, as it does for a real provider.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Engine } from "@orchestration/engine"
import { Thread } from "@orchestration/agents"
import { Effect, Exit, Scope } from "effect"
import { make as agentsDomain } from "../src/AgentsDomain.js"
import * as HeldProvider from "./fixtures/heldProvider.js"
import { effectStatus, postJson, raw, startServer, tempDataDir, waitFor } from "./fixtures/server.js"
import { openSse, type SseMessage, until } from "./fixtures/sse.js"

const send = (url: string, threadId: string, messageId: string, text = "hi") =>
  postJson(url, "/v1/commands", {
    commandId: `send-${threadId}-${messageId}`,
    type: "message.send",
    threadId,
    messageId,
    text
  })

const runningAttempt = (url: string, effectId: string, attempt: number) =>
  waitFor(
    `${effectId} running at attempt ${attempt}`,
    Effect.map(effectStatus(url, effectId), (row) =>
      row.status === "running" && row.attempts === attempt ? row : undefined
    )
  )

/** Waits until the attempt's recorded text reaches `end` (the reactor flushes within 50 ms). */
const recorded = (engine: Engine.EngineShape, effectId: string, attempt: number, end: number) =>
  waitFor(
    `${effectId}#${attempt} recorded to ${end}`,
    Effect.map(Effect.orDie(engine.readStreamChunks(effectId)), (chunks) =>
      chunks.some((c) => c.attempt === attempt && c.end === end) ? true : undefined
    )
  )

const deltas = (messages: ReadonlyArray<SseMessage>) => messages.filter((m) => m.event === "delta")
const eventTypes = (messages: ReadonlyArray<SseMessage>) =>
  messages.filter((m) => m.event === "thread-event").map((m) => m.data.type)
const has = (type: string) => (messages: ReadonlyArray<SseMessage>) => eventTypes(messages).includes(type)

/** Every delta starts where the last one of its attempt ended: no gap, no repeat. */
const assertContiguous = (messages: ReadonlyArray<SseMessage>) => {
  const ends = new Map<number, number>()
  for (const d of deltas(messages)) {
    assert.strictEqual(d.data.offset, ends.get(d.data.attempt) ?? 0, `delta ${d.id} is contiguous`)
    ends.set(d.data.attempt, d.data.offset + d.data.text.length)
  }
}
const textOf = (messages: ReadonlyArray<SseMessage>, attempt: number) =>
  deltas(messages)
    .filter((d) => d.data.attempt === attempt)
    .map((d) => d.data.text)
    .join("")

describe("GET /v1/threads/:threadId/stream", () => {
  it.scopedLive(
    "the first delta arrives before the step's outcome commits, and the deltas are the recorded answer",
    () =>
      Effect.gen(function* () {
        const provider = yield* HeldProvider.make
        const { url } = yield* startServer({ domain: agentsDomain({ provider: provider.layer }) })
        const feed = yield* provider.next
        yield* send(url, "t1", "m1")
        const effectId = Thread.stepEffectId("t1:m1", 1)
        yield* runningAttempt(url, effectId, 1)
        const sse = yield* openSse(url, "/v1/threads/t1/stream")
        assert.strictEqual(sse.status, 200)
        yield* until("turn.started", sse, has("turn.started"))

        yield* feed.text("Hello")
        yield* until("the first delta", sse, (ms) => textOf(ms, 1) === "Hello")
        yield* feed.text(", ")
        yield* until("the second delta", sse, (ms) => textOf(ms, 1) === "Hello, ")
        // The step is still running: its outcome has not committed, and no response was sent.
        assert.strictEqual((yield* effectStatus(url, effectId)).status, "running")
        assert.isFalse(has("turn.completed")(sse.messages))
        assert.deepStrictEqual(deltas(sse.messages)[0]!.data, {
          turnId: "t1:m1",
          step: 1,
          attempt: 1,
          offset: 0,
          text: "Hello"
        })

        yield* feed.text("streaming world")
        yield* feed.finish("Hello, streaming world")
        yield* until("turn.completed", sse, has("turn.completed"))
        const responded = sse.messages.find((m) => m.event === "thread-event" && m.data.type === "turn.completed")!
        assert.strictEqual(textOf(sse.messages, 1), responded.data.payload.text)
        assertContiguous(sse.messages)
        // Deltas sit between the step's start and its response, and no notice marks the answer partial.
        const order = sse.messages.map((m) => (m.event === "thread-event" ? m.data.type : m.event))
        assert.deepStrictEqual(
          order.filter(
            (o, i) => o !== "thread.created" && o !== "message.queued" && !(o === "delta" && order[i - 1] === "delta")
          ),
          ["turn.started", "delta", "turn.completed"]
        )
        assert.strictEqual(
          deltas(sse.messages)[0]!.id,
          `${sse.messages.find((m) => m.data.type === "turn.started")!.id!.split(":")[0]}:1:1:5:t1:m1`
        )
        assert.deepStrictEqual(sse.comments.slice(0, 1), [": connected"])
      })
  )

  it.scopedLive("a client that reconnects with Last-Event-ID sees every delta and event exactly once", () =>
    Effect.gen(function* () {
      const provider = yield* HeldProvider.make
      const { url, engine } = yield* startServer({ domain: agentsDomain({ provider: provider.layer }) })
      const feed = yield* provider.next
      yield* send(url, "t2", "m1")
      const effectId = Thread.stepEffectId("t2:m1", 1)
      yield* runningAttempt(url, effectId, 1)
      const firstScope = yield* Scope.make()
      const first = yield* openSse(url, "/v1/threads/t2/stream").pipe(Scope.extend(firstScope))
      yield* feed.text("one ")
      yield* feed.text("two ")
      yield* until("two deltas", first, (ms) => textOf(ms, 1) === "one two ")
      yield* Scope.close(firstScope, Exit.void)
      const seen = [...first.messages]
      const lastId = seen.at(-1)!.id!
      // While the client is away the step streams on; one chunk lands while it reconnects.
      yield* feed.text("three ")
      yield* recorded(engine, effectId, 1, 14)
      const second = yield* openSse(url, "/v1/threads/t2/stream", { "last-event-id": lastId })
      yield* feed.text("four")
      yield* feed.finish("one two three four")
      yield* until("turn.completed", second, has("turn.completed"))
      const all = [...seen, ...second.messages]
      assertContiguous(all)
      assert.strictEqual(textOf(all, 1), "one two three four")
      const ids = all.map((m) => m.id)
      assert.strictEqual(new Set(ids).size, ids.length, "no message twice")
      // The same as one uninterrupted read from the start.
      const fresh = yield* openSse(url, "/v1/threads/t2/stream")
      yield* until("fresh turn.completed", fresh, has("turn.completed"))
      assert.deepStrictEqual(eventTypes(all), eventTypes(fresh.messages))
      assert.strictEqual(textOf(fresh.messages, 1), "one two three four")
      // Caught up at once (several chunks in one page): one attempt's text, and no notice.
      assert.deepStrictEqual(
        fresh.messages.filter((m) => m.event !== "thread-event" && m.event !== "delta"),
        []
      )
    })
  )

  it.scopedLive("text of a failed attempt is marked superseded, and the retry streams from offset 0", () =>
    Effect.gen(function* () {
      const provider = yield* HeldProvider.make
      const { url } = yield* startServer({ domain: agentsDomain({ provider: provider.layer }) })
      const first = yield* provider.next
      const second = yield* provider.next
      yield* send(url, "t3", "m1")
      const effectId = Thread.stepEffectId("t3:m1", 1)
      yield* runningAttempt(url, effectId, 1)
      const sse = yield* openSse(url, "/v1/threads/t3/stream")
      yield* first.text("Partial")
      yield* until("attempt 1's text", sse, (ms) => textOf(ms, 1) === "Partial")
      // Attempt 1 fails retryably (its answer is never recorded); attempt 2 streams the answer.
      yield* first.fail
      yield* runningAttempt(url, effectId, 2)
      yield* second.text("Final ")
      yield* second.text("answer")
      yield* second.finish("Final answer")
      yield* until("turn.completed", sse, has("turn.completed"))
      const kinds = sse.messages.filter((m) => m.event !== "thread-event").map((m) => m.event)
      assert.deepStrictEqual(kinds.slice(0, 2), ["delta", "superseded"])
      const superseded = sse.messages.find((m) => m.event === "superseded")!
      assert.deepStrictEqual(superseded.data, { turnId: "t3:m1", step: 1, attempt: 1, length: 7 })
      assert.strictEqual(textOf(sse.messages, 2), "Final answer")
      assert.strictEqual(deltas(sse.messages).find((d) => d.data.attempt === 2)!.data.offset, 0)
    })
  )

  it.scopedLive(
    "an interrupted turn's partial text is marked interrupted; a resume after the notice does not repeat it",
    () =>
      Effect.gen(function* () {
        const provider = yield* HeldProvider.make
        const { url } = yield* startServer({ domain: agentsDomain({ provider: provider.layer }) })
        const feed = yield* provider.next
        yield* send(url, "t4", "m1")
        const effectId = Thread.stepEffectId("t4:m1", 1)
        yield* runningAttempt(url, effectId, 1)
        const sse = yield* openSse(url, "/v1/threads/t4/stream")
        yield* feed.text("Half an ans")
        yield* until("the partial text", sse, (ms) => textOf(ms, 1) === "Half an ans")
        // Sent just before the interrupt, inside the 50 ms flush window: buffered when the stop comes.
        yield* feed.text("wer")
        yield* postJson(url, "/v1/commands", {
          commandId: "stop-t4",
          type: "turn.interrupt",
          threadId: "t4",
          turnId: "t4:m1"
        })
        yield* until("turn.ended", sse, has("turn.ended"))
        const notice = sse.messages.find((m) => m.event === "interrupted")!
        assert.deepStrictEqual(notice.data, {
          turnId: "t4:m1",
          step: 1,
          attempt: 1,
          length: 14,
          reason: "interrupted by the user"
        })
        assert.strictEqual(textOf(sse.messages, 1), "Half an answer")
        const index = sse.messages.indexOf(notice)
        assert.strictEqual(sse.messages[index + 1]!.data.type, "turn.ended")
        // Resuming right after the notice: the turn's end, and no second notice.
        const resumed = yield* openSse(url, "/v1/threads/t4/stream", { "last-event-id": notice.id! })
        yield* until("turn.ended again", resumed, has("turn.ended"))
        assert.deepStrictEqual(
          resumed.messages.map((m) => m.event),
          ["thread-event"]
        )
        // The transcript holds the user message only: the partial text never entered it.
        const transcript = yield* raw(url, "/v1/threads/t4/transcript")
        assert.isFalse(JSON.stringify(transcript.body.messages).includes("Half an ans"))
      })
  )

  it.scopedLive(
    "an unknown thread is 404, a malformed position 400, and a token is needed (header or access_token)",
    () =>
      Effect.gen(function* () {
        const provider = yield* HeldProvider.make
        const { url } = yield* startServer({
          domain: agentsDomain({ provider: provider.layer }),
          env: { API_TOKEN: "s3cret-token-value" }
        })
        const auth = { authorization: "Bearer s3cret-token-value" }
        const missing = yield* raw(url, "/v1/threads/nobody/stream", { headers: auth })
        assert.strictEqual(missing.status, 404)
        assert.strictEqual(missing.body.error, "NotFound")
        yield* provider.next
        yield* postJson(
          url,
          "/v1/commands",
          { commandId: "send-t5", type: "message.send", threadId: "t5", messageId: "m1", text: "hi" },
          auth
        )
        const bad = yield* raw(url, "/v1/threads/t5/stream", { headers: { ...auth, "last-event-id": "12:x" } })
        assert.strictEqual(bad.status, 400)
        assert.strictEqual(bad.body.error, "InvalidRequest")
        const anonymous = yield* raw(url, "/v1/threads/t5/stream")
        assert.strictEqual(anonymous.status, 401)
        const query = yield* openSse(url, "/v1/threads/t5/stream?access_token=s3cret-token-value")
        assert.strictEqual(query.status, 200)
        yield* until("turn.started", query, has("turn.started"))
      })
  )

  it.scopedLive(
    "after a server restart a client resumes with Last-Event-ID: the rest of the dead attempt, its notice, the new attempt from 0",
    () =>
      Effect.gen(function* () {
        const dataDir = tempDataDir()
        const effectId = Thread.stepEffectId("t6:m1", 1)
        const firstRun = yield* Scope.make()
        const before = yield* Effect.gen(function* () {
          const provider = yield* HeldProvider.make
          const { url, engine } = yield* startServer({ domain: agentsDomain({ provider: provider.layer }), dataDir })
          const feed = yield* provider.next
          yield* send(url, "t6", "m1")
          yield* runningAttempt(url, effectId, 1)
          const sse = yield* openSse(url, "/v1/threads/t6/stream")
          yield* feed.text("Before ")
          yield* until("the first delta", sse, (ms) => textOf(ms, 1) === "Before ")
          sse.close()
          const seen = [...sse.messages]
          // Recorded after the client went away, before the server stops.
          yield* feed.text("the stop")
          yield* recorded(engine, effectId, 1, 15)
          return seen
        }).pipe(Scope.extend(firstRun))
        // A clean stop: the held step is cut off and handed back (model.step is replay-safe).
        yield* Scope.close(firstRun, Exit.void)

        const provider = yield* HeldProvider.make
        const feed = yield* provider.next
        const { url } = yield* startServer({ domain: agentsDomain({ provider: provider.layer }), dataDir })
        yield* runningAttempt(url, effectId, 2)
        const resumed = yield* openSse(url, "/v1/threads/t6/stream", { "last-event-id": before.at(-1)!.id! })
        yield* feed.text("After ")
        yield* feed.text("restart")
        yield* feed.finish("After restart")
        yield* until("turn.completed", resumed, has("turn.completed"))
        const all = [...before, ...resumed.messages]
        assertContiguous(all)
        assert.strictEqual(textOf(all, 1), "Before the stop")
        assert.strictEqual(textOf(all, 2), "After restart")
        assert.deepStrictEqual(resumed.messages.find((m) => m.event === "superseded")!.data, {
          turnId: "t6:m1",
          step: 1,
          attempt: 1,
          length: 15
        })
        const ids = all.map((m) => m.id)
        assert.strictEqual(new Set(ids).size, ids.length, "no message twice")
        assert.strictEqual(all.find((m) => m.data?.type === "turn.completed")!.data.payload.text, "After restart")
      })
  )
})

// A step's tool-call argument deltas (event tool-delta), beside its text deltas.
const of = (event: string) => (messages: ReadonlyArray<SseMessage>) => messages.filter((m) => m.event === event)
const argsOf = (messages: ReadonlyArray<SseMessage>, callId: string) =>
  of("tool-delta")(messages)
    .filter((m) => m.data.toolCallId === callId)
    .map((m) => m.data.text)
    .join("")

/** A server whose thread's first turn is streaming from a held provider (the test feeds it). */
const streamingTurn = (threadId: string, text: string) =>
  Effect.gen(function* () {
    const provider = yield* HeldProvider.make
    const started = yield* startServer({ domain: agentsDomain({ provider: provider.layer }) })
    const feed = yield* provider.next
    yield* send(started.url, threadId, "m1", text)
    yield* runningAttempt(started.url, Thread.stepEffectId(`${threadId}:m1`, 1), 1)
    return { url: started.url, provider, feed }
  })

describe("tool-call argument deltas on the thread stream", () => {
  it.scopedLive(
    "event tool-delta carries each call's arguments as they stream, contiguous per call, resumable without repeats",
    () =>
      Effect.gen(function* () {
        const { url, provider, feed } = yield* streamingTurn("td", "publish it")
        const args = { path: "notes.md", content: "hi 👋" }
        const json = JSON.stringify(args)
        const firstScope = yield* Scope.make()
        const first = yield* openSse(url, "/v1/threads/td/stream").pipe(Scope.extend(firstScope))
        yield* feed.text("Publishing.")
        yield* feed.toolArgs("call_a", "publish", json.slice(0, 10))
        yield* until("the first argument delta", first, (ms) => argsOf(ms, "call_a") === json.slice(0, 10))
        yield* Scope.close(firstScope, Exit.void)
        const lastId = first.messages.at(-1)!.id!
        yield* feed.toolArgs("call_a", "publish", json.slice(10))
        const second = yield* openSse(url, "/v1/threads/td/stream", { "last-event-id": lastId })
        yield* until("the rest of the arguments", second, (ms) => argsOf([...first.messages, ...ms], "call_a") === json)
        const next = yield* provider.next
        yield* feed.respond({ text: "Publishing.", toolCalls: [{ id: "call_a", name: "publish", arguments: args }] })
        yield* next.finish("done")
        yield* until("turn.completed", second, has("turn.completed"))
        const all = [...first.messages, ...second.messages]
        const ids = all.map((m) => m.id)
        assert.strictEqual(new Set(ids).size, ids.length, "no message twice")
        const toolDeltas = of("tool-delta")(all)
        let offset = 0
        for (const d of toolDeltas) {
          assert.deepStrictEqual(
            [d.data.turnId, d.data.step, d.data.attempt, d.data.toolCallId, d.data.offset],
            ["td:m1", 1, 1, "call_a", offset]
          )
          offset += d.data.text.length
        }
        assert.strictEqual(argsOf(all, "call_a"), json)
        // The text deltas are the text alone, with text offsets.
        assert.deepStrictEqual(
          of("delta")(all).map((d) => [d.data.step, d.data.offset, d.data.text]),
          [[1, 0, "Publishing."]]
        )
        const responded = all.find((m) => m.event === "thread-event" && m.data.type === "model.responded")!
        assert.deepStrictEqual(JSON.parse(argsOf(all, "call_a")), responded.data.payload.toolCalls[0].arguments)
        // A fresh read from the start gives the same pieces, merged per call.
        const fresh = yield* openSse(url, "/v1/threads/td/stream")
        yield* until("fresh turn.completed", fresh, has("turn.completed"))
        assert.strictEqual(argsOf(fresh.messages, "call_a"), json)
      })
  )
})
