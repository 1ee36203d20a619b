import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { fileURLToPath } from "node:url"
import { jsonLines, runChild } from "./fixtures/child.js"
import { script, tempDir } from "./fixtures/agents.js"

const child = fileURLToPath(new URL("../dist/test/fixtures/agents-child.js", import.meta.url))

interface Chunk {
  readonly attempt: number
  readonly start: number
  readonly end: number
  readonly text: string
  readonly commandId: string
}

const words = ["one ", "two ", "three ", "four ", "five"]

describe("a model step killed with SIGKILL mid-stream", () => {
  it.live(
    "runs again as a new attempt from offset 0; the dead attempt's partial text stays apart; no chunk twice; the transcript holds the final text once",
    () =>
      Effect.gen(function* () {
        const dir = tempDir("agents-stream-crash-")
        const effectId = "step:c1:m1#1"
        // Deltas 150 ms apart, flushed each on its own (50 ms): killed right after the second commit.
        const text = script({ chunks: words, chunkDelayMs: 150 })
        const killed = yield* runChild(child, [dir, "send", "c1", "m1", text], {
          FAULT_POINTS: "stream.after-flush:kind=model.step:nth=2"
        })
        assert.strictEqual(killed.signal, "SIGKILL", `the fault point did not fire: ${killed.stderr}`)
        const restarted = yield* runChild(child, [dir, "serve", "c1", "1"], { STREAM_EFFECTS: effectId })
        assert.strictEqual(restarted.code, 0, restarted.stderr)
        const final = jsonLines(restarted.stdout).find((l) => "thread" in l)!
        assert.strictEqual(final.thread.turns[0].status, "completed")
        assert.isTrue(final.transcript.valid, JSON.stringify(final.transcript.problems))
        const full = words.join("")
        const answers = (final.transcript.messages as Array<{ role: string; content: string | null }>).filter(
          (m) => m.role === "assistant"
        )
        assert.deepStrictEqual(
          answers.map((m) => m.content),
          [full]
        )

        const chunks = final.streams[effectId] as ReadonlyArray<Chunk>
        const byAttempt = new Map<number, Array<Chunk>>()
        for (const c of chunks) byAttempt.set(c.attempt, [...(byAttempt.get(c.attempt) ?? []), c])
        assert.deepStrictEqual([...byAttempt.keys()], [1, 2])
        for (const [attempt, list] of byAttempt) {
          // Contiguous from offset 0, each range and command once.
          let end = 0
          for (const c of list) {
            assert.strictEqual(c.start, end, `attempt ${attempt} has a gap or overlap at ${c.start}`)
            end = c.end
          }
          assert.strictEqual(new Set(list.map((c) => c.commandId)).size, list.length)
        }
        // The dead attempt kept what it committed before the kill: the first two deltas.
        assert.strictEqual(
          byAttempt
            .get(1)!
            .map((c) => c.text)
            .join(""),
          "one two "
        )
        assert.strictEqual(
          byAttempt
            .get(2)!
            .map((c) => c.text)
            .join(""),
          full
        )
      })
  )
})
