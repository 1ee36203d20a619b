import { assert, describe, it } from "@effect/vitest"
import { Duration } from "effect"
import { toolDefinitions, toolKind, toolNames, toolPolicies } from "../src/Tools.js"

describe("Tools", () => {
  it("the policy table is the one of issue 4", () => {
    const table = Object.values(toolPolicies).map((policy) => [
      policy.kind,
      policy.tool ?? "–",
      policy.onProcessLoss,
      policy.lane,
      Duration.toSeconds(policy.timeout)
    ])
    assert.deepStrictEqual(table, [
      ["model.step", "–", "replay-safe", "thread", 120],
      ["tool.publish", "publish", "replay-safe", "thread", 30],
      ["tool.execute", "execute", "process-bound", "thread", 600],
      ["tool.delegate", "delegate", "replay-safe", "thread", 30],
      ["tool.trigger_edit", "trigger_edit", "replay-safe", "thread", 30],
      ["tool.mcp_call", "mcp_call", "process-bound", "thread", 60],
      ["thread.cleanup", "–", "replay-safe", "thread", 60]
    ])
  })

  it("every tool has a definition, a kind named tool.<name>, and a name OpenAI accepts", () => {
    assert.deepStrictEqual(toolDefinitions.map((definition) => definition.name), [...toolNames])
    for (const name of toolNames) {
      assert.match(name, /^[a-zA-Z0-9_-]+$/)
      assert.strictEqual(toolPolicies[toolKind(name)].tool, name)
    }
  })
})
