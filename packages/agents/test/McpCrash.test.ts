import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { jsonLines, runChild } from "./fixtures/child.js"
import { script, tempDir } from "./fixtures/agents.js"
import { callsOf, fixtureConfig, mcpConfig } from "./fixtures/mcp.js"

const child = fileURLToPath(new URL("../dist/test/fixtures/agents-child.js", import.meta.url))

const ledger = (dir: string): Array<Record<string, any>> => {
  const file = join(dir, "world", "ledger.jsonl")
  return existsSync(file)
    ? readFileSync(file, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l))
    : []
}

/** Starts the agents server on `dir`, waits until the fixture saw the call of `tool`, then SIGKILLs the server. */
const killMidCall = (dir: string, log: string, tool: string, text: string) =>
  Effect.promise(async () => {
    const server = spawn(process.execPath, [child, dir, "send", "t1", "m1", text], { stdio: "ignore" })
    const exited = new Promise((resolve) => server.once("exit", resolve))
    for (let i = 0; i < 1_200 && callsOf(log, tool) === 0; i++) await new Promise((r) => setTimeout(r, 25))
    server.kill("SIGKILL")
    await exited
    return callsOf(log, tool)
  })

const setUp = () => {
  const dir = tempDir("agents-mcp-crash-")
  const log = join(dir, "fixture.jsonl")
  writeFileSync(join(dir, "mcp.json"), JSON.stringify(mcpConfig({ fixture: fixtureConfig(log) })))
  return { dir, log }
}

describe("SIGKILL of the server during an MCP call: the tool's annotations decide", () => {
  it.live("a call of a tool without hints is answered interrupted after restart, and ran once", () =>
    Effect.gen(function* () {
      const { dir, log } = setUp()
      const text = script(
        { toolCalls: [{ name: "fixture__slow_write", arguments: { label: "release", sleepMs: 60_000 } }] },
        { text: "resumed" }
      )
      assert.strictEqual(yield* killMidCall(dir, log, "slow_write", text), 1, "the call never reached the server")
      const restarted = yield* runChild(child, [dir, "serve", "t1", "1"])
      assert.strictEqual(restarted.code, 0, restarted.stderr)
      const out = jsonLines(restarted.stdout)
      assert.deepStrictEqual(out[0]!.reconciled, { requeued: 0, failed: 1, alreadySettled: 0, quarantined: 0 })
      const final = out.find((l) => "thread" in l)!
      const results = final.transcript.messages.filter((m: any) => m.role === "tool").map((m: any) => m.content)
      assert.deepStrictEqual(results, [
        "interrupted: tool.mcp_call tool:t1:m1:call_1_0 may or may not have taken effect; verify whether the call of slow_write on MCP server fixture already took effect before repeating it"
      ])
      assert.strictEqual(final.thread.turns[0].status, "completed")
      assert.strictEqual(callsOf(log, "slow_write"), 1)
      assert.deepStrictEqual(
        ledger(dir)
          .filter((l) => l.kind === "tool.mcp_call")
          .map((l) => l.onProcessLoss),
        ["process-bound"]
      )
    })
  )

  it.live("a call of a read-only tool is performed again after restart and answered", () =>
    Effect.gen(function* () {
      const { dir, log } = setUp()
      const text = script(
        { toolCalls: [{ name: "fixture__echo", arguments: { text: "again", sleepMs: 3_000 } }] },
        { text: "resumed" }
      )
      assert.strictEqual(yield* killMidCall(dir, log, "echo", text), 1, "the call never reached the server")
      const restarted = yield* runChild(child, [dir, "serve", "t1", "1"])
      assert.strictEqual(restarted.code, 0, restarted.stderr)
      const out = jsonLines(restarted.stdout)
      assert.deepStrictEqual(out[0]!.reconciled, { requeued: 1, failed: 0, alreadySettled: 0, quarantined: 0 })
      const final = out.find((l) => "thread" in l)!
      const results = final.transcript.messages
        .filter((m: any) => m.role === "tool")
        .map((m: any) => JSON.parse(m.content))
      assert.deepStrictEqual(results, [
        {
          server: "fixture",
          tool: "echo",
          content: [{ type: "text", text: "echo: again" }],
          isError: false,
          structuredContent: { echoed: "again" }
        }
      ])
      assert.strictEqual(callsOf(log, "echo"), 2)
      assert.deepStrictEqual(
        ledger(dir)
          .filter((l) => l.kind === "tool.mcp_call")
          .map((l) => [l.attempt, l.onProcessLoss]),
        [
          [1, "replay-safe"],
          [2, "replay-safe"]
        ]
      )
    })
  )
})
