import { assert, describe, it } from "@effect/vitest"
import { Duration } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { scriptedCallId } from "../src/ScriptedProvider.js"
import { toolEffectId, turnIdOf } from "../src/Thread.js"
import { toolDefinitions, toolKind, toolNames, toolPolicies } from "../src/Tools.js"

const repoRoot = fileURLToPath(new URL("../../../", import.meta.url))

/** The repository's Markdown files outside dependencies and build output. */
const markdownFiles = (dir: string): ReadonlyArray<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (entry.name.startsWith(".") || entry.name === "node_modules" || entry.name === "dist") return []
    const path = join(dir, entry.name)
    return entry.isDirectory() ? markdownFiles(path) : entry.name.endsWith(".md") ? [path] : []
  })

describe("Tools", () => {
  it("each tool kind has its process-loss policy, lane and timeout, and the table does not drift", () => {
    const table = Object.values(toolPolicies).map((policy) => [
      policy.kind,
      policy.tool ?? "–",
      typeof policy.onProcessLoss === "function" ? "from the payload" : policy.onProcessLoss,
      policy.lane,
      Duration.toSeconds(policy.timeout)
    ])
    assert.deepStrictEqual(table, [
      ["model.step", "–", "replay-safe", "thread", 120],
      ["tool.publish", "publish", "replay-safe", "thread", 30],
      ["tool.execute", "execute", "process-bound", "thread", 600],
      ["tool.delegate", "delegate", "replay-safe", "thread", 30],
      ["tool.trigger_edit", "trigger_edit", "replay-safe", "thread", 30],
      ["tool.mcp_call", "–", "from the payload", "thread", 60],
      ["thread.cleanup", "–", "replay-safe", "thread", 60],
      ["trigger.fire", "–", "replay-safe", "trigger", 30],
      ["delegate.reply", "–", "replay-safe", "thread", 30],
      ["delegate.withdraw", "–", "replay-safe", "thread", 30]
    ])
  })

  it("an MCP call's policy is the one recorded in its payload; without one it is process-bound", () => {
    const policy = toolPolicies["tool.mcp_call"].onProcessLoss as (payload: unknown) => string
    const payload = (onProcessLoss: string) => ({ name: "s__t", mcp: { server: "s", tool: "t", onProcessLoss } })
    assert.deepStrictEqual(
      [policy(payload("replay-safe")), policy(payload("process-bound")), policy({ name: "s__t" }), policy(null)],
      ["replay-safe", "process-bound", "process-bound", "process-bound"]
    )
  })

  it("every tool has a definition, a kind named tool.<name>, and a name OpenAI accepts", () => {
    assert.deepStrictEqual(
      toolDefinitions.map((definition) => definition.name),
      [...toolNames]
    )
    for (const name of toolNames) {
      assert.match(name, /^[a-zA-Z0-9_-]+$/)
      assert.strictEqual(toolPolicies[toolKind(name)].tool, name)
    }
  })

  it("every example tool effect id in the docs has the form the id builder makes", () => {
    // The first call of the first step of message m1 on thread t1, as a scripted turn makes it.
    assert.strictEqual(toolEffectId(turnIdOf("t1", "m1"), scriptedCallId(1, 0)), "tool:t1:m1:call_1_0")
    const examples = markdownFiles(repoRoot).flatMap((file) =>
      [...readFileSync(file, "utf8").matchAll(/'(tool:[^'\s]+)'/g)].map(
        (match) => [file.slice(repoRoot.length), match[1]!] as const
      )
    )
    assert.isAbove(examples.length, 0)
    for (const [file, id] of examples) {
      const [, thread, message, step, index] = /^tool:([^:]+):([^:]+):call_(\d+)_(\d+)$/.exec(id) ?? []
      assert.isDefined(thread, `${file}: ${id}`)
      assert.strictEqual(
        id,
        toolEffectId(turnIdOf(thread!, message!), scriptedCallId(Number(step), Number(index))),
        file
      )
    }
  })
})
