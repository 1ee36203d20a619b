import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { domain as agents } from "../src/AgentsDomain.js"
import { parseConfig } from "../src/Config.js"
import { raw, startServer, tempDataDir } from "./fixtures/server.js"

const fixture = fileURLToPath(
  new URL("../../../packages/agents/dist/test/fixtures/mcp-fixture-server.js", import.meta.url)
)

const server = (dataDir: string, env: Record<string, string> = {}) => ({
  command: process.execPath,
  args: [fixture],
  env: { MCP_FIXTURE_LOG: join(dataDir, "fixture.jsonl"), ...env }
})

describe("MCP servers in the server's configuration and health", () => {
  it("<DATA_DIR>/mcp.json is read when present, MCP_CONFIG names another file; a bad one stops the server", () => {
    const dataDir = tempDataDir()
    assert.deepStrictEqual(Either.getOrThrow(parseConfig({ DATA_DIR: dataDir }, "/")).mcp, { mcpServers: {} })
    writeFileSync(join(dataDir, "mcp.json"), JSON.stringify({ mcpServers: { fixture: { command: "node" } } }))
    assert.deepStrictEqual(Either.getOrThrow(parseConfig({ DATA_DIR: dataDir }, "/")).mcp, {
      mcpServers: { fixture: { command: "node" } }
    })
    const bad = join(dataDir, "bad.json")
    const refusal = (text: string | undefined, file = bad) => {
      if (text !== undefined) writeFileSync(file, text)
      const parsed = parseConfig({ DATA_DIR: dataDir, MCP_CONFIG: file }, "/")
      assert.isTrue(Either.isLeft(parsed))
      return Either.isLeft(parsed) ? [parsed.left.variable, parsed.left.message] : []
    }
    const [variable, notJson] = refusal("{ not json")
    assert.strictEqual(variable, "MCP_CONFIG")
    assert.include(notJson, bad)
    assert.include(refusal(JSON.stringify({ mcpServers: { a_b: { command: "x" } } }))[1], "a_b")
    assert.include(refusal(JSON.stringify({ mcpServers: { a: { args: [] } } }))[1], "command")
    assert.include(refusal(undefined, join(dataDir, "missing.json"))[1], "ENOENT")
  })

  it.scopedLive("a server that fails to start makes /health degraded (not unavailable) and says which", () =>
    Effect.gen(function* () {
      const dataDir = tempDataDir()
      writeFileSync(
        join(dataDir, "mcp.json"),
        JSON.stringify({
          mcpServers: { fixture: server(dataDir), broken: server(dataDir, { MCP_FIXTURE_FAIL: "1" }) }
        })
      )
      const { url } = yield* startServer({ domain: agents, dataDir })
      const health = yield* raw(url, "/health")
      assert.strictEqual(health.status, 200)
      assert.strictEqual(health.body.status, "degraded")
      assert.deepStrictEqual(health.body.components, [
        { name: "mcp:fixture", status: "ok", message: "ready, 4 tools" },
        {
          name: "mcp:broken",
          status: "degraded",
          message: "failed: failed to start: broken: MCP error -32000: Connection closed"
        }
      ])
    })
  )
})
