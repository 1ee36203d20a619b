import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { join } from "node:path"
import * as McpServers from "../src/McpServers.js"
import { processesWith, tempDir } from "./fixtures/agents.js"
import { callsOf, fixtureConfig, fixtureLog, fixtureServer, mcpConfig } from "./fixtures/mcp.js"

/** Polls a condition against real processes, bounded by wall clock. */
const until = <E, R>(condition: Effect.Effect<boolean, E, R>, what: string, ms = 20_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    while (Date.now() < deadline) {
      if (yield* condition) return
      yield* Effect.sleep("20 millis")
    }
    return yield* Effect.dieMessage(`never happened: ${what}`)
  })

const servers = (config: Parameters<typeof McpServers.make>[0]["config"]) => McpServers.make({ config })

describe("MCP servers over stdio (the real fixture server)", () => {
  it.scopedLive("a server's tools are listed with their schemas and the policy their annotations give", () =>
    Effect.gen(function* () {
      const log = join(tempDir("mcp-"), "calls.jsonl")
      const mcp = yield* servers(mcpConfig({ fixture: fixtureConfig(log) }))
      const tools = yield* mcp.tools
      assert.deepStrictEqual(
        tools.map((t) => [t.name, t.onProcessLoss]),
        [
          ["fixture__echo", "replay-safe"],
          ["fixture__slow_write", "process-bound"],
          ["fixture__fail", "process-bound"],
          ["fixture__add_tool", "replay-safe"]
        ]
      )
      const echo = tools[0]!
      assert.strictEqual(echo.description, "Echo the text back.")
      assert.deepStrictEqual(Object.keys(echo.inputSchema.properties as object), ["text", "sleepMs", "repeat"])
      assert.deepStrictEqual(echo.inputSchema.required, ["text"])
      const [status] = yield* mcp.statuses
      assert.deepStrictEqual([status!.name, status!.state, status!.tools], ["fixture", "ready", 4])
      assert.isNumber(status!.pid)
    })
  )

  it.scopedLive("calls are answered; isError is the tool's own answer; unknown names are refused by reason", () =>
    Effect.gen(function* () {
      const log = join(tempDir("mcp-"), "calls.jsonl")
      const mcp = yield* servers(mcpConfig({ fixture: fixtureConfig(log) }))
      const call = (tool: string, args: unknown) =>
        mcp.call({ server: "fixture", tool, arguments: args, timeoutMs: 10_000 })
      assert.deepStrictEqual(yield* call("echo", { text: "hi" }), {
        server: "fixture",
        tool: "echo",
        content: [{ type: "text", text: "echo: hi" }],
        isError: false,
        structuredContent: { echoed: "hi" }
      })
      const failed = yield* call("fail", { why: "no" })
      assert.deepStrictEqual([failed.isError, failed.content], [true, [{ type: "text", text: "failed: no" }]])
      const reasons = [
        yield* Effect.flip(mcp.call({ server: "nope", tool: "echo", arguments: {}, timeoutMs: 1_000 })),
        yield* Effect.flip(call("nope", {})),
        yield* Effect.flip(call("echo", [1]))
      ].map((e) => e.reason)
      assert.deepStrictEqual(reasons, ["unknown-server", "unknown-tool", "invalid-arguments"])
      assert.deepStrictEqual([callsOf(log, "echo"), callsOf(log, "fail")], [1, 1])
    })
  )

  it.scopedLive("tools/list_changed: a tool the server adds later is offered", () =>
    Effect.gen(function* () {
      const log = join(tempDir("mcp-"), "calls.jsonl")
      const mcp = yield* servers(mcpConfig({ fixture: fixtureConfig(log) }))
      yield* mcp.call({ server: "fixture", tool: "add_tool", arguments: {}, timeoutMs: 10_000 })
      yield* until(
        Effect.map(mcp.tools, (tools) => tools.some((t) => t.name === "fixture__late")),
        "the late tool is listed"
      )
      assert.strictEqual((yield* mcp.tools).find((t) => t.name === "fixture__late")?.onProcessLoss, "replay-safe")
    })
  )

  it.scopedLive("interrupting a running call sends notifications/cancelled to the server", () =>
    Effect.gen(function* () {
      const log = join(tempDir("mcp-"), "calls.jsonl")
      const mcp = yield* servers(mcpConfig({ fixture: fixtureConfig(log) }))
      const running = yield* Effect.fork(
        mcp.call({
          server: "fixture",
          tool: "slow_write",
          arguments: { label: "x", sleepMs: 60_000 },
          timeoutMs: 90_000
        })
      )
      yield* until(
        Effect.sync(() => callsOf(log, "slow_write") === 1),
        "the call reached the server"
      )
      yield* Fiber.interrupt(running)
      yield* until(
        Effect.sync(() => fixtureLog(log).some((e) => e.event === "cancelled" && e.tool === "slow_write")),
        "the server saw the cancellation"
      )
      assert.isFalse(fixtureLog(log).some((e) => e.event === "done"))
    })
  )

  it.scopedLive("a call that outlives its timeout fails as timeout and is cancelled at the server", () =>
    Effect.gen(function* () {
      const log = join(tempDir("mcp-"), "calls.jsonl")
      const mcp = yield* servers(mcpConfig({ fixture: fixtureConfig(log) }))
      const error = yield* Effect.flip(
        mcp.call({ server: "fixture", tool: "slow_write", arguments: { label: "x", sleepMs: 60_000 }, timeoutMs: 300 })
      )
      assert.strictEqual(error.reason, "timeout")
      assert.include(error.message, "may or may not have taken effect")
      yield* until(
        Effect.sync(() => fixtureLog(log).some((e) => e.event === "cancelled" && e.tool === "slow_write")),
        "the server saw the cancellation"
      )
    })
  )

  it.scopedLive("a server that fails to start or dies offers no tools and says why, with its stderr", () =>
    Effect.gen(function* () {
      const dir = tempDir("mcp-")
      const log = join(dir, "calls.jsonl")
      const mcp = yield* servers(
        mcpConfig({
          broken: fixtureConfig(log, { MCP_FIXTURE_FAIL: "1" }),
          missing: { command: join(dir, "no-such-command") },
          fixture: fixtureConfig(log)
        })
      )
      const statuses = yield* mcp.statuses
      assert.deepStrictEqual(
        statuses.map((s) => [s.name, s.state, s.tools]),
        [
          ["broken", "failed", 0],
          ["missing", "failed", 0],
          ["fixture", "ready", 4]
        ]
      )
      assert.include(statuses[0]!.stderrTail, "refusing to start (MCP_FIXTURE_FAIL=1)")
      assert.include(statuses[1]!.message, "ENOENT")
      assert.deepStrictEqual([...new Set((yield* mcp.tools).map((t) => t.server))], ["fixture"])
      // The fixture dies: its tools go, and a call is refused as unavailable, not sent.
      process.kill(statuses[2]!.pid!, "SIGKILL")
      yield* until(
        Effect.map(mcp.statuses, (statuses) => statuses[2]!.state === "exited"),
        "the exit is noticed"
      )
      assert.deepStrictEqual(yield* mcp.tools, [])
      const refused = yield* Effect.flip(
        mcp.call({ server: "fixture", tool: "echo", arguments: { text: "x" }, timeoutMs: 1_000 })
      )
      assert.strictEqual(refused.reason, "server-unavailable")
    })
  )

  it.scopedLive(
    "a server whose process dies while a helper of it holds its pipes is ended at once: a call in flight fails as server-exited, not timeout",
    () =>
      Effect.gen(function* () {
        const log = join(tempDir("mcp-"), "calls.jsonl")
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            for (const pid of processesWith("sleep", "6201")) process.kill(Number(pid), "SIGKILL")
          })
        )
        // A wrapper whose helper shares the server's stdout and stderr (a spawned tool would too).
        const mcp = yield* servers(
          mcpConfig({
            fixture: {
              command: "/bin/sh",
              args: ["-c", `sleep 6201 & exec ${JSON.stringify(process.execPath)} ${JSON.stringify(fixtureServer)}`],
              env: { MCP_FIXTURE_LOG: log }
            }
          })
        )
        const [before] = yield* mcp.statuses
        assert.strictEqual(before!.state, "ready")
        const inFlight = yield* Effect.fork(
          Effect.flip(
            mcp.call({ server: "fixture", tool: "echo", arguments: { text: "x", sleepMs: 60_000 }, timeoutMs: 30_000 })
          )
        )
        yield* until(
          Effect.sync(() => callsOf(log, "echo") === 1),
          "the call reached the server"
        )
        process.kill(before!.pid!, "SIGKILL")
        yield* until(
          Effect.map(mcp.statuses, ([status]) => status!.state === "exited"),
          "the exit is noticed"
        )
        assert.deepStrictEqual(yield* mcp.tools, [])
        assert.strictEqual(processesWith("sleep", "6201").length, 1, "the helper still holds the pipes")
        const failed = yield* Fiber.join(inFlight)
        assert.strictEqual(failed.reason, "server-exited", failed.message)
        const refused = yield* Effect.flip(
          mcp.call({ server: "fixture", tool: "echo", arguments: { text: "y" }, timeoutMs: 30_000 })
        )
        assert.strictEqual(refused.reason, "server-unavailable")
      })
  )
})

describe("listing a server's tools", () => {
  it.effect("two listings at once (two tools/list_changed): the one started last is kept, whichever answers last", () =>
    Effect.gen(function* () {
      const server: McpServers.Running = { ...McpServers.notStarted("fixture"), state: "ready" }
      // The first listing's answer (the list before the change) arrives after the second's.
      const answers: Array<(tools: ReadonlyArray<{ name: string; inputSchema: { type: "object" } }>) => void> = []
      const client = {
        listTools: () =>
          new Promise<{ tools: Array<{ name: string; inputSchema: { type: "object" } }> }>((resolve) => {
            answers.push((tools) => resolve({ tools: [...tools] }))
          })
      } as unknown as Parameters<typeof McpServers.listTools>[1]
      const first = McpServers.listTools(server, client)
      const second = McpServers.listTools(server, client)
      answers[1]!([
        { name: "old", inputSchema: { type: "object" } },
        { name: "late", inputSchema: { type: "object" } }
      ])
      yield* Effect.promise(() => second)
      answers[0]!([{ name: "old", inputSchema: { type: "object" } }])
      yield* Effect.promise(() => first)
      assert.deepStrictEqual(
        server.tools.map((t) => t.name),
        ["fixture__old", "fixture__late"]
      )
    })
  )

  it.effect("a refresh that fails says so in the status, unless a later one has started since", () =>
    Effect.gen(function* () {
      const server: McpServers.Running = { ...McpServers.notStarted("fixture"), state: "ready" }
      const answers: Array<{ ok: () => void; fail: () => void }> = []
      const client = {
        listTools: () =>
          new Promise<{ tools: Array<{ name: string; inputSchema: { type: "object" } }> }>((resolve, reject) => {
            answers.push({
              ok: () => resolve({ tools: [{ name: "new", inputSchema: { type: "object" } }] }),
              fail: () => reject(new Error("connection reset"))
            })
          })
      } as unknown as Parameters<typeof McpServers.refreshTools>[1]
      const older = McpServers.refreshTools(server, client)
      const newer = McpServers.refreshTools(server, client)
      answers[1]!.ok()
      yield* Effect.promise(() => newer)
      answers[0]!.fail()
      yield* Effect.promise(() => older)
      assert.deepStrictEqual([server.tools.map((t) => t.name), server.message], [["fixture__new"], null])
      const last = McpServers.refreshTools(server, client)
      answers[2]!.fail()
      yield* Effect.promise(() => last)
      assert.deepStrictEqual(
        [server.tools.map((t) => t.name), server.message],
        [["fixture__new"], "could not list tools after tools/list_changed: connection reset"]
      )
    })
  )

  it.effect("a newer listing that fails does not drop an older one's answer (a tools/list_changed during start)", () =>
    Effect.gen(function* () {
      const server = McpServers.notStarted("fixture")
      const answers: Array<{ ok: () => void; fail: () => void }> = []
      const client = {
        listTools: () =>
          new Promise<{ tools: Array<{ name: string; inputSchema: { type: "object" } }> }>((resolve, reject) => {
            answers.push({
              ok: () => resolve({ tools: [{ name: "echo", inputSchema: { type: "object" } }] }),
              fail: () => reject(new Error("timed out"))
            })
          })
      } as unknown as Parameters<typeof McpServers.refreshTools>[1]
      const initial = McpServers.listTools(server, client)
      const refresh = McpServers.refreshTools(server, client)
      answers[1]!.fail()
      yield* Effect.promise(() => refresh)
      answers[0]!.ok()
      yield* Effect.promise(() => initial)
      assert.deepStrictEqual(
        server.tools.map((t) => t.name),
        ["fixture__echo"]
      )
    })
  )
})
