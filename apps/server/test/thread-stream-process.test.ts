/**
 * The thread stream across a SIGKILL of the real server process mid-answer: the scripted provider
 * streams a step chunk by chunk, the server dies, a new process on the same store runs the step
 * again, and a client that resumes with Last-Event-ID sees every committed delta exactly once.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { agentsMain, exitOf, serving, startProcess } from "./fixtures/process.js"
import { postJson, raw, tempDataDir } from "./fixtures/server.js"
import { openSse, type SseMessage, until } from "./fixtures/sse.js"

const deltas = (ms: ReadonlyArray<SseMessage>) => ms.filter((m) => m.event === "delta")
const textOf = (ms: ReadonlyArray<SseMessage>, attempt: number) =>
  deltas(ms)
    .filter((d) => d.data.attempt === attempt)
    .map((d) => d.data.text)
    .join("")

describe("the thread stream and a killed server", () => {
  it.scopedLive(
    "SIGKILL mid-stream: after restart the resumed client has the dead attempt's text once, marked superseded, then the new attempt whole",
    () =>
      Effect.gen(function* () {
        const dataDir = tempDataDir()
        const env = { DATA_DIR: dataDir, SHUTDOWN_GRACE_MS: "1000" }
        const chunks = Array.from({ length: 12 }, (_, i) => `word${i} `)
        const answer = chunks.join("")
        const first = yield* startProcess(env, agentsMain)
        const firstUrl = yield* serving(first)
        const sent = yield* postJson(firstUrl, "/v1/commands", {
          commandId: "send-k",
          type: "message.send",
          threadId: "tk",
          messageId: "m1",
          text: JSON.stringify({ script: [{ chunks, chunkDelayMs: 150 }] })
        })
        assert.strictEqual(sent.status, 200, JSON.stringify(sent.body))
        const before = yield* openSse(firstUrl, "/v1/threads/tk/stream")
        yield* until("three deltas", before, (ms) => deltas(ms).length >= 3)
        first.child.kill("SIGKILL")
        yield* exitOf(first)
        yield* Effect.promise(() => before.ended)
        const seen = [...before.messages]
        assert.isFalse(
          seen.some((m) => m.data?.type === "turn.completed"),
          "killed before the answer"
        )

        const second = yield* startProcess(env, agentsMain)
        const secondUrl = yield* serving(second)
        const resumed = yield* openSse(secondUrl, "/v1/threads/tk/stream", { "last-event-id": seen.at(-1)!.id! })
        yield* until("turn.completed", resumed, (ms) => ms.some((m) => m.data?.type === "turn.completed"), 30_000)
        const all = [...seen, ...resumed.messages]
        // Every delta continues its attempt exactly where the last one ended: no gap, no repeat.
        const ends = new Map<number, number>()
        for (const d of deltas(all)) {
          assert.strictEqual(d.data.offset, ends.get(d.data.attempt) ?? 0, `delta ${d.id}`)
          ends.set(d.data.attempt, d.data.offset + d.data.text.length)
        }
        const ids = all.map((m) => m.id)
        assert.strictEqual(new Set(ids).size, ids.length, "no message twice")
        const dead = textOf(all, 1)
        assert.isTrue(answer.startsWith(dead) && dead.length > 0, dead)
        const notice = all.find((m) => m.event === "superseded")!
        assert.deepStrictEqual(notice.data, { turnId: "tk:m1", step: 1, attempt: 1, length: dead.length })
        assert.strictEqual(textOf(all, 2), answer)
        assert.strictEqual(all.find((m) => m.data?.type === "turn.completed")!.data.payload.text, answer)
        const transcript = yield* raw(secondUrl, "/v1/threads/tk/transcript")
        assert.isTrue(transcript.body.valid)
        assert.deepStrictEqual(
          transcript.body.messages
            .filter((m: { role: string }) => m.role === "assistant")
            .map((m: { content: string }) => m.content),
          [answer]
        )
        second.child.kill("SIGTERM")
        yield* exitOf(second)
      }),
    90_000
  )
})
