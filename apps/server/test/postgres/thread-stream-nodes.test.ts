/**
 * One thread's stream (GET /v1/threads/:id/stream) read on a server process other than the one
 * performing its model step, both real processes on one PostgreSQL schema: the step's text reaches
 * the other node only through the shared store (its chunks committed there, the reader woken by
 * the performer's NOTIFY). The scripted provider streams a known answer chunk by chunk, slowly, so
 * the step is still running while its first chunks are read. Runs in the PostgreSQL run.
 */
import { assert, describe, it } from "@effect/vitest"
import { Thread } from "@orchestration/agents"
import { Effect, Exit, Scope } from "effect"
import { openSse, type SseMessage, until } from "../fixtures/sse.js"
import { deployment, get, post, waitUntil } from "./deployment.js"

const deltas = (ms: ReadonlyArray<SseMessage>) => ms.filter((m) => m.event === "delta")
const textOf = (ms: ReadonlyArray<SseMessage>, attempt: number) =>
  deltas(ms)
    .filter((d) => d.data.attempt === attempt)
    .map((d) => d.data.text)
    .join("")
const eventTypes = (ms: ReadonlyArray<SseMessage>) =>
  ms.filter((m) => m.event === "thread-event").map((m) => m.data.type as string)
/** The thread events that close a model step (AgentsStreamSteps): its outcome is in the log. */
const outcomeTypes = ["model.responded", "turn.completed", "turn.ended"]
const hasOutcome = (ms: ReadonlyArray<SseMessage>) => eventTypes(ms).some((t) => outcomeTypes.includes(t))
const completed = (ms: ReadonlyArray<SseMessage>) => eventTypes(ms).includes("turn.completed")

/** Every delta starts where the last one of its attempt ended: no gap, no repeat. */
const assertContiguous = (ms: ReadonlyArray<SseMessage>, label: string) => {
  const ends = new Map<number, number>()
  for (const d of deltas(ms)) {
    assert.strictEqual(d.data.offset, ends.get(d.data.attempt) ?? 0, `${label}: delta ${d.id} is contiguous`)
    ends.set(d.data.attempt, d.data.offset + d.data.text.length)
  }
}
const assertNoRepeat = (ms: ReadonlyArray<SseMessage>, label: string) => {
  const ids = ms.map((m) => m.id)
  assert.strictEqual(new Set(ids).size, ids.length, `${label}: no message twice`)
}

describe("one thread's stream on a PostgreSQL node that is not running its model step", () => {
  it.scopedLive(
    "deltas reach the other node before the step's outcome, add up to the recorded answer, and a resume there sees each once",
    () =>
      Effect.gen(function* () {
        const d = deployment()
        const a = yield* d.node("node-a")
        const b = yield* d.node("node-b")
        // 24 chunks 250 ms apart: about 6 s of streaming, so the step runs on while its first
        // chunks are read and while a reader is away.
        const chunks = Array.from({ length: 24 }, (_, i) => `word${i} `)
        const answer = chunks.join("")
        const sent = yield* post(a.url, {
          commandId: "send-ts",
          type: "message.send",
          threadId: "ts",
          messageId: "m1",
          text: JSON.stringify({ script: [{ chunks, chunkDelayMs: 250 }] })
        })
        assert.strictEqual(sent.status, 200, JSON.stringify(sent.body))
        const effectPath = `/v1/effects/${encodeURIComponent(Thread.stepEffectId("ts:m1", 1))}`

        // Whichever process's reactor claims the step performs it (there is no routing of turns):
        // the lease says which, and the stream is read on the other one.
        const claimed = yield* waitUntil(
          "the model step to be claimed",
          Effect.map(get(b.url, effectPath), (row) => (row.status === "running" ? row : undefined)),
          30_000
        )
        const [runner, reader] = String(claimed.leaseOwner).startsWith("node-a:")
          ? [a, b]
          : String(claimed.leaseOwner).startsWith("node-b:")
            ? [b, a]
            : assert.fail(`unexpected lease owner ${claimed.leaseOwner}`)
        const readerId = reader === a ? "node-a:" : "node-b:"
        const stream = "/v1/threads/ts/stream"

        const live = yield* openSse(reader.url, stream)
        assert.strictEqual(live.status, 200)
        const awayScope = yield* Scope.make()
        const away = yield* openSse(reader.url, stream).pipe(Scope.extend(awayScope))

        // The first delta on the reader's node while the step still runs on the other one.
        yield* until("the first delta on the reader's node", live, (ms) => deltas(ms).length > 0, 30_000)
        assert.isFalse(hasOutcome(live.messages), "a delta arrived before the step's outcome event")
        const during = yield* get(reader.url, effectPath)
        assert.strictEqual(during.status, "running", "the step's outcome has not committed yet")
        assert.isFalse(String(during.leaseOwner).startsWith(readerId), "the reader's node is not the performer")
        const early = textOf(live.messages, deltas(live.messages)[0]!.data.attempt)
        assert.isTrue(early.length > 0 && early.length < answer.length && answer.startsWith(early), early)

        // The second client goes away mid-stream, after two deltas and before the outcome.
        yield* until("two deltas on the client that goes away", away, (ms) => deltas(ms).length >= 2, 30_000)
        yield* Scope.close(awayScope, Exit.void)
        const seen = [...away.messages]
        assert.isFalse(hasOutcome(seen), "the client went away before the outcome")
        const lastDelta = deltas(seen).at(-1)!.data
        const lastEnd = lastDelta.offset + lastDelta.text.length
        // While it is away the text goes on: the other client sees past where it left.
        yield* until(
          "a delta committed while the client is away",
          live,
          (ms) =>
            deltas(ms).some(
              (m) => m.data.attempt === lastDelta.attempt && m.data.offset + m.data.text.length > lastEnd
            ),
          30_000
        )
        const back = yield* openSse(reader.url, stream, { "last-event-id": seen.at(-1)!.id! })
        assert.strictEqual(back.status, 200)
        yield* until("turn.completed after the resume", back, completed, 60_000)
        yield* until("turn.completed on the client that stayed", live, completed, 60_000)

        // The answer as recorded, read through the API.
        const settled = yield* get(reader.url, effectPath)
        assert.strictEqual(settled.status, "succeeded")
        const attempt = settled.attempts as number
        const transcript = yield* get(reader.url, "/v1/threads/ts/transcript")
        assert.isTrue(transcript.valid)
        const recorded: Array<string> = transcript.messages
          .filter((m: { role: string }) => m.role === "assistant")
          .map((m: { content: string }) => m.content)
        assert.deepStrictEqual(recorded, [answer])
        const thread = yield* get(runner.url, "/v1/threads/ts")
        assert.strictEqual(thread.turns[0].status, "completed")

        // The client that stayed: the attempt's deltas are the recorded answer, all before the outcome.
        assertContiguous(live.messages, "live")
        assertNoRepeat(live.messages, "live")
        assert.strictEqual(textOf(live.messages, attempt), recorded[0])
        const firstOutcome = live.messages.findIndex(
          (m) => m.event === "thread-event" && outcomeTypes.includes(m.data.type)
        )
        const lastDeltaAt = live.messages.map((m) => m.event).lastIndexOf("delta")
        assert.isBelow(lastDeltaAt, firstOutcome)

        // The client that went away: across its two connections, every delta and event exactly once.
        const all = [...seen, ...back.messages]
        assert.isAbove(deltas(back.messages).length, 0, "the resumed connection carried deltas")
        assertContiguous(all, "resumed")
        assertNoRepeat(all, "resumed")
        assert.strictEqual(textOf(all, attempt), recorded[0])
        assert.deepStrictEqual(eventTypes(all), eventTypes(live.messages))
      }),
    { timeout: 150_000 }
  )
})
