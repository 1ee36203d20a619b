import { assert, describe, it } from "@effect/vitest"
import { Engine, Outbox } from "@orchestration/engine"
import { Effect, Layer } from "effect"
import { join } from "node:path"
import * as McpResults from "../src/McpResults.js"
import { ModelProvider, type ModelStepRequest } from "../src/Provider.js"
import * as ScriptedProvider from "../src/ScriptedProvider.js"
import { transcriptView } from "../src/ThreadReadModel.js"
import { agentsStack, allTurnsTerminal, script, send, tempDir, waitFor } from "./fixtures/agents.js"
import { callsOf, fixtureConfig, mcpConfig } from "./fixtures/mcp.js"

/** The scripted model, recording what each step offered it. */
const recording = () => {
  const requests: Array<ModelStepRequest> = []
  const layer = Layer.succeed(ModelProvider, {
    step: (request) => Effect.suspend(() => (requests.push(request), ScriptedProvider.make.step(request)))
  })
  return { requests, layer }
}

describe("a scripted turn calls MCP tools of a real server", () => {
  it.live(
    "the tools are offered, answers reach the transcript, isError is the tool's result, unknown names fail",
    () => {
      const dir = tempDir("agents-mcp-turn-")
      const log = join(dir, "fixture.jsonl")
      const model = recording()
      return Effect.gen(function* () {
        const engine = yield* Engine.Engine
        yield* engine.dispatchWithReceipt(
          send(
            "t1",
            "m1",
            script(
              {
                toolCalls: [
                  { name: "fixture__echo", arguments: { text: "hi" } },
                  { name: "fixture__fail", arguments: {} },
                  { name: "fixture__nope", arguments: {} },
                  { name: "other__echo", arguments: {} }
                ]
              },
              { text: "done" }
            )
          )
        )
        yield* waitFor(allTurnsTerminal("t1", 1), "turn done")
        const offered = model.requests[0]!.tools.map((t) => t.name)
        assert.deepStrictEqual(offered.slice(-4), [
          "fixture__echo",
          "fixture__slow_write",
          "fixture__fail",
          "fixture__add_tool"
        ])
        assert.notInclude(offered, "broken__echo")
        const transcript = (yield* transcriptView("t1"))!
        assert.isTrue(transcript.valid, JSON.stringify(transcript.problems))
        const results = transcript.messages.filter((m) => m.role === "tool").map((m) => String(m.content))
        assert.deepStrictEqual(JSON.parse(results[0]!), {
          server: "fixture",
          tool: "echo",
          content: [{ type: "text", text: "echo: hi" }],
          isError: false,
          structuredContent: { echoed: "hi" }
        })
        assert.deepStrictEqual(JSON.parse(results[1]!), {
          server: "fixture",
          tool: "fail",
          content: [{ type: "text", text: "failed: as asked" }],
          isError: true
        })
        assert.deepStrictEqual(results.slice(2), [
          "error: MCP server 'fixture' offers no tool named 'nope'",
          "error: no MCP server named 'other' is configured"
        ])
        // Each row carries the policy the step found, so what happens after a crash is already decided.
        const rows = yield* Effect.forEach(["call_1_0", "call_1_1", "call_1_2"], (id) =>
          Outbox.find(`tool:t1:m1:${id}`)
        )
        assert.deepStrictEqual(
          rows.map((row) => [
            row!.kind,
            row!.status,
            (row!.payload as { mcp: { onProcessLoss: string } }).mcp.onProcessLoss
          ]),
          [
            ["tool.mcp_call", "succeeded", "replay-safe"],
            ["tool.mcp_call", "succeeded", "process-bound"],
            ["tool.mcp_call", "failed", "process-bound"]
          ]
        )
        assert.deepStrictEqual([callsOf(log, "echo"), callsOf(log, "fail")], [1, 1])
      }).pipe(
        Effect.provide(
          agentsStack({
            dir,
            provider: model.layer,
            mcp: mcpConfig({ fixture: fixtureConfig(log), broken: fixtureConfig(log, { MCP_FIXTURE_FAIL: "1" }) })
          })
        )
      )
    }
  )

  it.live("an answer over the cap reaches the row, the transcript and the model cut to the cap, saying so", () => {
    const dir = tempDir("agents-mcp-cap-")
    const log = join(dir, "fixture.jsonl")
    const model = recording()
    return Effect.gen(function* () {
      const engine = yield* Engine.Engine
      // About 2 MB of answer (text and structured content), against the default cap of 128 KiB.
      const call = { name: "fixture__echo", arguments: { text: "0123456789", repeat: 100_000 } }
      yield* engine.dispatchWithReceipt(send("t1", "m1", script({ toolCalls: [call] }, { text: "read it" })))
      yield* waitFor(allTurnsTerminal("t1", 1), "turn done")
      const row = yield* Outbox.find("tool:t1:m1:call_1_0")
      assert.strictEqual(row?.status, "succeeded")
      const stored = JSON.stringify(row?.response)
      assert.isAtMost(Buffer.byteLength(stored), McpResults.defaultResultBytes)
      const response = row?.response as { content: Array<{ text: string }>; truncated?: { bytes: number } }
      assert.isTrue(response.content[0]!.text.startsWith("echo: 0123456789"))
      assert.match(response.content.at(-1)!.text, /^\[the tool's answer of \d+ bytes was cut to the 131072-byte cap/)
      assert.isAbove(response.truncated!.bytes, 2_000_000)
      // The model's next step reads the cut answer, not two megabytes.
      const toolMessage = model.requests[1]!.transcript.find((m) => m.role === "tool")
      assert.isAtMost(String(toolMessage?.content).length, McpResults.defaultResultBytes)
      const transcript = (yield* transcriptView("t1"))!
      assert.isTrue(transcript.valid, JSON.stringify(transcript.problems))
    }).pipe(
      Effect.provide(agentsStack({ dir, provider: model.layer, mcp: mcpConfig({ fixture: fixtureConfig(log) }) }))
    )
  })
})
