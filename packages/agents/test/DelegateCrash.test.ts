/**
 * Delegate-and-await survives SIGKILL: a real engine process is killed while the awaited thread's
 * turn runs (or while the answer travels), restarted, and the waiting call still gets the awaited
 * turn's final text, once, with every transcript valid and the awaited thread's publish done once.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { script, tempDir } from "./fixtures/agents.js"
import { jsonLines, runChild } from "./fixtures/child.js"

const child = fileURLToPath(new URL("../dist/test/fixtures/agents-child.js", import.meta.url))

const helperScript = script(
  { toolCalls: [{ name: "publish", arguments: { path: "notes/summary.md", content: "the summary" } }] },
  { text: "helper done" }
)
const parentScript = script(
  { toolCalls: [{ name: "delegate", arguments: { threadId: "helper", text: helperScript, await: true } }] },
  { text: "parent done" }
)

const crashAndResume = (fault: string) =>
  Effect.gen(function* () {
    const dir = tempDir("agents-delegate-crash-")
    const killed = yield* runChild(child, [dir, "send", "t1", "m1", parentScript], { FAULT_POINTS: fault })
    assert.strictEqual(killed.signal, "SIGKILL", `the fault point ${fault} did not fire: ${killed.stderr}`)
    const restarted = yield* runChild(child, [dir, "serve", "t1", "1"], { ALSO_THREADS: "helper" })
    assert.strictEqual(restarted.code, 0, restarted.stderr)
    const final = jsonLines(restarted.stdout).find((l) => "thread" in l)!
    const versions = join(dir, "world", "versions", "notes", "summary.md.jsonl")
    return {
      parent: final.thread,
      transcript: final.transcript,
      helper: final.also.helper,
      versions: existsSync(versions) ? readFileSync(versions, "utf8").split("\n").filter(Boolean).length : 0
    }
  })

const assertAnsweredOnce = (r: Effect.Effect.Success<ReturnType<typeof crashAndResume>>) => {
  assert.deepStrictEqual(
    r.parent.turns.map((t: { status: string }) => t.status),
    ["completed"]
  )
  assert.isTrue(r.transcript.valid, JSON.stringify(r.transcript.problems))
  const results = r.transcript.messages.filter((m: { role: string }) => m.role === "tool")
  assert.deepStrictEqual(
    results.map((m: { content: string }) => m.content),
    [JSON.stringify({ threadId: "helper", status: "completed", text: "helper done" })]
  )
  assert.deepStrictEqual(r.transcript.messages.at(-1), { role: "assistant", content: "parent done" })
  assert.isTrue(r.helper.transcript.valid, JSON.stringify(r.helper.transcript.problems))
  assert.deepStrictEqual(
    r.helper.thread.turns.map((t: { status: string }) => t.status),
    ["completed"]
  )
  assert.strictEqual(r.versions, 1)
}

describe("delegate-and-await killed with SIGKILL resumes to the same answer, once", () => {
  it.live("while the awaited turn runs (its publish performed, not settled)", () =>
    Effect.gen(function* () {
      assertAnsweredOnce(yield* crashAndResume("reactor.after-perform:kind=tool.publish:nth=1"))
    })
  )

  it.live("after the delegate's message was accepted, before the delegate settled", () =>
    Effect.gen(function* () {
      assertAnsweredOnce(yield* crashAndResume("reactor.after-perform:kind=tool.delegate:nth=1"))
    })
  )

  it.live("after the answer was delivered, before its reply row settled", () =>
    Effect.gen(function* () {
      assertAnsweredOnce(yield* crashAndResume("reactor.after-perform:kind=delegate.reply:nth=1"))
    })
  )
})
