import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { jsonLines, runChild } from "./fixtures/child.js"
import { script, tempDir } from "./fixtures/agents.js"

const child = fileURLToPath(new URL("../dist/test/fixtures/agents-child.js", import.meta.url))

const lines = (file: string): Array<Record<string, any>> =>
  existsSync(file)
    ? readFileSync(file, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l))
    : []

/** pid → [parent pid, argv], from the process table. */
const processTable = () => {
  const table = new Map<number, { readonly ppid: number; readonly argv: ReadonlyArray<string> }>()
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue
      table.set(Number(pid), { ppid, argv: readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0") })
    } catch {
      // swallow-ok: the process ended while the table was read
    }
  }
  return table
}

/** Live descendants of `root` running `sleep <seconds>`. */
const sleepsUnder = (root: number, seconds: string) => {
  const table = processTable()
  const descends = (pid: number): boolean => {
    for (let p = table.get(pid)?.ppid; p !== undefined && p > 1; p = table.get(p)?.ppid) if (p === root) return true
    return false
  }
  return [...table]
    .filter(([pid, info]) => info.argv[0] === "sleep" && info.argv[1] === seconds && descends(pid))
    .map(([pid]) => pid)
}

const alive = (pid: number) => processTable().has(pid)

describe("SIGKILL of the server while a sandboxed command runs", () => {
  it.live("no process of the command is left, and after restart the call is answered interrupted, run once", () =>
    Effect.gen(function* () {
      const dir = tempDir("agents-sandbox-crash-")
      const text = script(
        { toolCalls: [{ name: "execute", arguments: { command: "sleep 600" } }] },
        { text: "resumed" }
      )
      const server = spawn(process.execPath, [child, dir, "send", "t1", "m1", text], { stdio: "ignore" })
      const sleeps = yield* Effect.promise(async () => {
        for (let i = 0; i < 1_200; i++) {
          const found = sleepsUnder(server.pid!, "600")
          if (found.length > 0) return found
          await new Promise((resolve) => setTimeout(resolve, 50))
        }
        return []
      })
      assert.strictEqual(sleeps.length, 1, "the command never started")
      const exited = new Promise((resolve) => server.once("exit", resolve))
      server.kill("SIGKILL")
      yield* Effect.promise(() => exited)
      // --die-with-parent: the jail goes with the server, at once or very nearly.
      yield* Effect.promise(async () => {
        for (let i = 0; i < 200 && sleeps.some(alive); i++) await new Promise((resolve) => setTimeout(resolve, 25))
      })
      assert.deepStrictEqual(sleeps.filter(alive), [])
      const restarted = yield* runChild(child, [dir, "serve", "t1", "1"])
      assert.strictEqual(restarted.code, 0, restarted.stderr)
      const out = jsonLines(restarted.stdout)
      assert.deepStrictEqual(out[0]!.reconciled, { requeued: 0, failed: 1, alreadySettled: 0, quarantined: 0 })
      const final = out.find((l) => "thread" in l)!
      const results = final.transcript.messages.filter((m: any) => m.role === "tool").map((m: any) => m.content)
      assert.strictEqual(results.length, 1)
      assert.match(
        results[0],
        /^interrupted: tool\.execute tool:t1:m1:call_1_0 may or may not have taken effect \(the command "sleep 600" requested at [^ ]+ may have started; any process of it died with the server/
      )
      assert.strictEqual(final.thread.turns[0].status, "completed")
      const world = join(dir, "world")
      assert.strictEqual(lines(join(world, "ledger.jsonl")).filter((l) => l.kind === "tool.execute").length, 1)
      assert.strictEqual(lines(join(world, "executions.jsonl")).length, 1)
    })
  )
})
