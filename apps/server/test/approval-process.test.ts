/**
 * An approval survives a crash: the agents server as a real process, a turn whose `execute` awaits
 * approval, the process killed with SIGKILL (no shutdown at all), a new process on the same data
 * directory. The call still waits, nothing ran, its deadline timer is still pending; approved now,
 * it runs once and the turn completes with a valid transcript.
 */
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
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }))
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

describe("approval across a crash", () => {
  it.scopedLive("SIGKILL while a call awaits approval: after a restart it still waits, and approved it runs once", () =>
    Effect.gen(function* () {
      const dataDir = mkdtempSync(join(tmpdir(), "server-approval-"))
      const env = { DATA_DIR: dataDir, APPROVAL: "required", APPROVAL_TIMEOUT: "1h" }
      const first = yield* startProcess(env, agentsMain)
      const url = yield* serving(first)
      const script = {
        script: [{ toolCalls: [{ name: "execute", arguments: { command: "echo survived" } }] }, { text: "done" }]
      }
      const sent = yield* post(url, {
        commandId: "turn-1",
        type: "message.send",
        threadId: "t1",
        messageId: "m1",
        text: JSON.stringify(script)
      })
      assert.strictEqual(sent.status, 200)
      yield* waitUntil(
        "the call to await approval",
        Effect.map(get(url, "/v1/approvals"), (r: any) => (r.approvals?.length === 1 ? r : undefined))
      )
      first.child.kill("SIGKILL")
      const killed = yield* exitOf(first)
      assert.strictEqual(killed.signal, "SIGKILL")

      const second = yield* startProcess(env, agentsMain)
      const url2 = yield* serving(second)
      const pending = (yield* get(url2, "/v1/approvals")) as {
        approvals: Array<{ callId: string; arguments: unknown; deadline: number }>
      }
      assert.deepStrictEqual(
        pending.approvals.map((a) => [a.callId, a.arguments]),
        [["call_1_0", { command: "echo survived" }]]
      )
      // The deadline is the one recorded before the crash: an hour after the call was planned.
      assert.isAbove(pending.approvals[0]!.deadline, Date.now() + 50 * 60_000)
      const thread = (yield* get(url2, "/v1/threads/t1")) as any
      assert.strictEqual(thread.turns[0].status, "awaiting-approval")
      const executions = join(dataDir, "world", "executions.jsonl")
      assert.isFalse(existsSync(executions) && readFileSync(executions, "utf8").trim() !== "")

      const approved = yield* post(url2, {
        commandId: "approve-1",
        type: "tool.approve",
        threadId: "t1",
        callId: "call_1_0"
      })
      assert.deepStrictEqual([approved.status, approved.body.effectIds], [200, ["tool:t1:m1:call_1_0"]])
      const done = yield* waitUntil(
        "the turn to complete",
        Effect.map(get(url2, "/v1/threads/t1"), (t: any) => (t.turns?.[0]?.status === "completed" ? t : undefined))
      )
      assert.strictEqual(JSON.parse(done.turns[0].toolCalls[0].result).stdout, "survived\n")
      const transcript = (yield* get(url2, "/v1/threads/t1/transcript")) as { valid: boolean }
      assert.isTrue(transcript.valid)
      assert.strictEqual(readFileSync(executions, "utf8").split("\n").filter(Boolean).length, 1)
      second.child.kill("SIGTERM")
      assert.strictEqual((yield* exitOf(second)).code, 0)
    })
  )

  it.scopedLive(
    "SIGKILL while a call awaits approval: its deadline still fires after the restart, at the recorded time",
    () =>
      Effect.gen(function* () {
        const dataDir = mkdtempSync(join(tmpdir(), "server-approval-deadline-"))
        const env = { DATA_DIR: dataDir, APPROVAL: "required", APPROVAL_TIMEOUT: "4s" }
        const first = yield* startProcess(env, agentsMain)
        const url = yield* serving(first)
        const script = {
          script: [{ toolCalls: [{ name: "execute", arguments: { command: "echo never" } }] }, { text: "ok" }]
        }
        yield* post(url, {
          commandId: "turn-1",
          type: "message.send",
          threadId: "t1",
          messageId: "m1",
          text: JSON.stringify(script)
        })
        const listed = (yield* waitUntil(
          "the call to await approval",
          Effect.map(get(url, "/v1/approvals"), (r: any) => (r.approvals?.length === 1 ? r : undefined))
        )) as { approvals: Array<{ deadline: number }> }
        first.child.kill("SIGKILL")
        yield* exitOf(first)

        const second = yield* startProcess(env, agentsMain)
        const url2 = yield* serving(second)
        const done = yield* waitUntil(
          "the deadline to answer the call",
          Effect.map(get(url2, "/v1/threads/t1"), (t: any) => (t.turns?.[0]?.status === "completed" ? t : undefined))
        )
        assert.deepStrictEqual(
          [
            done.turns[0].toolCalls[0].status,
            done.turns[0].toolCalls[0].approval.status,
            done.turns[0].toolCalls[0].result
          ],
          ["denied", "expired", "denied: no approval within 4 s; the call was not performed"]
        )
        const events = (yield* get(url2, "/v1/events?aggregateId=t1&after=0&limit=100")) as {
          events: Array<{ type: string; occurredAt: number; payload: { verdict?: string } }>
        }
        const expired = events.events.find((e) => e.type === "approval.closed" && e.payload.verdict === "expired")
        assert.isAtLeast(expired!.occurredAt, listed.approvals[0]!.deadline)
        assert.isFalse(existsSync(join(dataDir, "world", "executions.jsonl")))
        assert.isTrue(((yield* get(url2, "/v1/threads/t1/transcript")) as { valid: boolean }).valid)
        second.child.kill("SIGTERM")
        assert.strictEqual((yield* exitOf(second)).code, 0)
      })
  )
})
