/**
 * Stop reaches running work, end to end: the agents server as a process, a real `sleep` in the
 * bubblewrap jail, stopped through the HTTP API. Each test's command has a duration no other test
 * uses, so the process table tells whether any process of it is left.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdtempSync, readdirSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { agentsMain, exitOf, serving, startProcess } from "./fixtures/process.js"

const postJson = (url: string, path: string, body: unknown) =>
  Effect.promise(() =>
    fetch(`${url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body)
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }))
  )
const get = (url: string, path: string) => Effect.promise(() => fetch(`${url}${path}`).then((r) => r.json() as any))

/** Live processes whose argv is exactly these arguments, from the process table. */
const processesWith = (...argv: ReadonlyArray<string>) =>
  readdirSync("/proc")
    .filter((pid) => /^\d+$/.test(pid))
    .filter((pid) => {
      try {
        if (/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"))) return false
        const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean)
        return args.length === argv.length && args.every((arg, i) => arg === argv[i])
      } catch {
        return false // swallow-ok: the process ended while the table was read
      }
    })

const waitUntil = <A>(what: string, probe: Effect.Effect<A | undefined>, ms = 30_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    while (Date.now() < deadline) {
      const value = yield* probe
      if (value !== undefined) return value
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
    }
    return yield* Effect.dieMessage(`timed out waiting for ${what}`)
  })

/** A server running one turn whose first call is `sleep <seconds>`, once that process is running. */
const turnWithSleep = (seconds: string) =>
  Effect.gen(function* () {
    const dataDir = mkdtempSync(join(tmpdir(), "server-stop-"))
    const server = yield* startProcess({ DATA_DIR: dataDir, SHUTDOWN_GRACE_MS: "2000" }, agentsMain)
    const url = yield* serving(server)
    const script = {
      script: [{ toolCalls: [{ name: "execute", arguments: { command: `sleep ${seconds}` } }] }, { text: "after" }]
    }
    const sent = yield* postJson(url, "/v1/commands", {
      commandId: "turn-1",
      type: "message.send",
      threadId: "t1",
      messageId: "m1",
      text: JSON.stringify(script)
    })
    assert.strictEqual(sent.status, 200, JSON.stringify(sent.body))
    yield* waitUntil(
      "the sleep to start in the sandbox",
      Effect.sync(() => (processesWith("sleep", seconds).length === 1 ? true : undefined))
    )
    return { server, url, dataDir }
  })

const effectId = "tool:t1:m1:call_1_0"
const effectPath = `/v1/effects/${encodeURIComponent(effectId)}`

describe("stopping a running sandboxed command through the API", () => {
  it.scopedLive(
    "turn.interrupt during `sleep 600`: the turn is interrupted within 2 s and no sleep is left; a retry of the call is refused",
    () =>
      Effect.gen(function* () {
        const seconds = "600.0301"
        const { server, url } = yield* turnWithSleep(seconds)
        const asked = Date.now()
        const interrupt = yield* postJson(url, "/v1/commands", {
          commandId: "stop-1",
          type: "turn.interrupt",
          threadId: "t1",
          turnId: "t1:m1"
        })
        assert.strictEqual(interrupt.status, 200, JSON.stringify(interrupt.body))
        yield* waitUntil(
          "the turn to be interrupted",
          Effect.map(get(url, "/v1/threads/t1"), (t) => (t.turns?.[0]?.status === "interrupted" ? true : undefined))
        )
        yield* waitUntil(
          "the sleep to be gone",
          Effect.sync(() => (processesWith("sleep", seconds).length === 0 ? true : undefined))
        )
        assert.isBelow(Date.now() - asked, 2_000)
        // The row says what is known: cancelled, stopped after it started.
        const row = yield* waitUntil(
          "the performer to acknowledge the stop",
          Effect.map(get(url, effectPath), (e) => (e.leaseOwner === null ? e : undefined))
        )
        assert.strictEqual(row.status, "cancelled")
        assert.match(row.error.message, /interrupted by the user; it had started at .* and was stopped after \d+ ms/)
        const transcript = yield* get(url, "/v1/threads/t1/transcript")
        const result = transcript.messages.find((m: any) => m.role === "tool")
        assert.include(result.content, `the command "sleep ${seconds}", if it had started, was stopped`)
        // The call has its result and its turn closed: a process-bound call is never performed again.
        const retry = yield* postJson(url, `${effectPath}/retry`, { commandId: "retry-1" })
        assert.strictEqual(retry.status, 409, JSON.stringify(retry.body))
        assert.include(retry.body.message, "is process-bound and its call already has its result")
        server.child.kill("SIGTERM")
        assert.strictEqual((yield* exitOf(server)).code, 0)
      })
  )

  it.scopedLive(
    "POST /v1/effects/:id/cancel during `sleep 600`: the call is cancelled within 2 s, no sleep is left, and the turn goes on",
    () =>
      Effect.gen(function* () {
        const seconds = "600.0302"
        const { server, url } = yield* turnWithSleep(seconds)
        const asked = Date.now()
        const cancel = yield* postJson(url, `${effectPath}/cancel`, { commandId: "cancel-1" })
        assert.strictEqual(cancel.status, 200, JSON.stringify(cancel.body))
        yield* waitUntil(
          "the sleep to be gone",
          Effect.sync(() => (processesWith("sleep", seconds).length === 0 ? true : undefined))
        )
        assert.isBelow(Date.now() - asked, 2_000)
        const thread = yield* waitUntil(
          "the turn to end",
          Effect.map(get(url, "/v1/threads/t1"), (t) => (t.turns?.[0]?.status === "running" ? undefined : t))
        )
        assert.strictEqual(thread.turns[0].status, "completed")
        const row = yield* waitUntil(
          "the performer to acknowledge the stop",
          Effect.map(get(url, effectPath), (e) => (e.leaseOwner === null ? e : undefined))
        )
        assert.strictEqual(row.status, "cancelled")
        assert.match(row.error.message, /cancelled by an operator; it had started at .* and was stopped after \d+ ms/)
        const transcript = yield* get(url, "/v1/threads/t1/transcript")
        assert.isTrue(transcript.valid)
        assert.strictEqual(transcript.messages.find((m: any) => m.role === "tool").content.split(":")[0], "cancelled")
        server.child.kill("SIGTERM")
        assert.strictEqual((yield* exitOf(server)).code, 0)
      })
  )
})
