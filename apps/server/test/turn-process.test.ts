import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync, mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { agentsMain, exitOf, serving, startProcess } from "./fixtures/process.js"

const post = (url: string, body: unknown) =>
  Effect.promise(() =>
    fetch(`${url}/v1/commands`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body)
    }).then((r) => r.json())
  )
const get = (url: string, path: string) => Effect.promise(() => fetch(`${url}${path}`).then((r) => r.json()))

const waitUntil = <A>(what: string, probe: Effect.Effect<A | undefined>) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 30_000
    while (Date.now() < deadline) {
      const value = yield* probe
      if (value !== undefined) return value
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))
    }
    return yield* Effect.dieMessage(`timed out waiting for ${what}`)
  })

describe("the main job: the agents server as a process", () => {
  it.scopedLive(
    "SIGTERM during a running turn: exit 0, and after a restart the turn completes and its transcript validates",
    () =>
      Effect.gen(function* () {
        const dataDir = mkdtempSync(join(tmpdir(), "server-turn-"))
        const env = { DATA_DIR: dataDir, SHUTDOWN_GRACE_MS: "5000" }
        const first = yield* startProcess(env, agentsMain)
        const url = yield* serving(first)
        const script = {
          script: [
            { toolCalls: [{ name: "execute", arguments: { command: "sleep 2" } }] },
            { toolCalls: [{ name: "publish", arguments: { path: "out.md", content: "built" } }] },
            { text: "done" }
          ]
        }
        const sent = yield* post(url, {
          commandId: "turn-1",
          type: "message.send",
          threadId: "t1",
          messageId: "m1",
          text: JSON.stringify(script)
        })
        assert.strictEqual((sent as { duplicate: boolean }).duplicate, false)
        const executions = join(dataDir, "world", "executions.jsonl")
        yield* waitUntil(
          "the execute to start",
          Effect.sync(() => (existsSync(executions) ? true : undefined))
        )
        first.child.kill("SIGTERM")
        const exit = yield* exitOf(first)
        assert.strictEqual(exit.code, 0)

        const second = yield* startProcess(env, agentsMain)
        const url2 = yield* serving(second)
        const thread = yield* waitUntil(
          "the turn to end",
          Effect.map(get(url2, "/v1/threads/t1"), (t: any) => (t.turns?.[0]?.status === "running" ? undefined : t))
        )
        assert.strictEqual(thread.turns[0].status, "completed")
        const transcript = (yield* get(url2, "/v1/threads/t1/transcript")) as {
          valid: boolean
          messages: Array<{ role: string }>
        }
        assert.isTrue(transcript.valid)
        assert.deepStrictEqual(
          transcript.messages.map((m) => m.role),
          ["user", "assistant", "tool", "assistant", "tool", "assistant"]
        )
        // The execute ran once: either it finished within the grace period, or it was cut off and answered "interrupted".
        assert.strictEqual(readFileSync(executions, "utf8").split("\n").filter(Boolean).length, 1)
        second.child.kill("SIGTERM")
        assert.strictEqual((yield* exitOf(second)).code, 0)
      })
  )
})
