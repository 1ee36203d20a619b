/**
 * The operator's MCP servers, each a real child process spoken to over stdio with the official SDK's
 * client. At start each server is launched and its tools listed (again whenever it announces
 * `notifications/tools/list_changed`); only the tools of servers that are up are offered. A server
 * that fails to start or exits stays listed with its state, the reason and the tail of its stderr,
 * so the operator sees it; it is not restarted. All servers are closed when the scope closes.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { ErrorCode, McpError, ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import type { Reactor } from "@orchestration/engine"
import { Context, Duration, Effect, Layer, Schema } from "effect"
import type { ChildProcess } from "node:child_process"
import { type CappableResult, capResult, defaultResultBytes } from "./McpResults.js"
import { type McpConfig, type McpServerConfig, offeredName, policyOf } from "./McpTools.js"

// ---------------------------------------------------------------------------------------------
// What the service tells

export type McpServerState = "starting" | "ready" | "failed" | "exited"

export interface McpServerStatus {
  readonly name: string
  readonly state: McpServerState
  readonly pid: number | null
  /** Tools offered to the model (0 unless ready). */
  readonly tools: number
  /** Why the server is not ready, or tools that could not be offered. */
  readonly message: string | null
  /** The last bytes the server wrote to stderr, for the operator. */
  readonly stderrTail: string
}

/** A tool as it is offered: `<server>__<tool>`, its description and JSON input schema, and its policy. */
export interface McpToolEntry {
  readonly server: string
  readonly tool: string
  readonly name: string
  readonly description: string
  readonly inputSchema: Readonly<Record<string, unknown>>
  readonly onProcessLoss: Reactor.ProcessLossPolicy
}

/**
 * The server's answer, as the model sees it. `isError: true` is the tool's own error result;
 * `truncated` is set when the answer was cut to the cap (McpResults.ts).
 */
export interface McpToolResult extends CappableResult {}

/**
 * Why a call was not answered:
 * - `unknown-server`, `unknown-tool`: nothing by that name is configured or offered now;
 * - `server-unavailable`: the server failed to start or exited;
 * - `invalid-arguments`: the arguments are not a JSON object;
 * - `timeout`: no answer in time (the request was cancelled; it may have acted);
 * - `server-exited`: the server's process ended while the call ran (it may have acted);
 * - `protocol-error`: the server answered with a JSON-RPC error or broke the connection mid-call.
 */
export const McpCallFailure = Schema.Literal(
  "unknown-server",
  "unknown-tool",
  "server-unavailable",
  "invalid-arguments",
  "timeout",
  "server-exited",
  "protocol-error"
)
export type McpCallFailure = typeof McpCallFailure.Type

export class McpCallError extends Schema.TaggedError<McpCallError>()("McpCallError", {
  server: Schema.String,
  tool: Schema.String,
  reason: McpCallFailure,
  message: Schema.String
}) {}

/** Why a server did not start (recorded in its status; never fatal to the host). */
export class McpServerStartFailure extends Schema.TaggedError<McpServerStartFailure>()("McpServerStartFailure", {
  server: Schema.String,
  message: Schema.String
}) {}

export interface McpCallRequest {
  readonly server: string
  readonly tool: string
  readonly arguments: unknown
  readonly timeoutMs: number
}

export interface McpServersShape {
  /** The tools of the servers that are up, in config order. */
  readonly tools: Effect.Effect<ReadonlyArray<McpToolEntry>>
  readonly statuses: Effect.Effect<ReadonlyArray<McpServerStatus>>
  /** The offered tool, or why a call to it cannot start (checked before anything is recorded). */
  readonly lookup: (server: string, tool: string) => Effect.Effect<McpToolEntry, McpCallError>
  /** Calls the tool; interrupting the effect cancels the request (`notifications/cancelled`). */
  readonly call: (request: McpCallRequest) => Effect.Effect<McpToolResult, McpCallError>
}

export class McpServers extends Context.Tag("agents/McpServers")<McpServers, McpServersShape>() {}

export interface McpServersOptions {
  readonly config: McpConfig
  /** How long a server may take to start and list its tools. Default 20 seconds. */
  readonly startTimeout?: Duration.DurationInput
  /** Bytes of a call's answer kept (McpResults.ts); more is cut, saying so. Default 128 KiB. */
  readonly resultBytes?: number
}

/** Bytes of each server's stderr kept for the operator. */
export const stderrTailBytes = 4096

// ---------------------------------------------------------------------------------------------
// One server

/** One server's live state; exported for the listing's test. */
export interface Running {
  readonly name: string
  state: McpServerState
  client: Client | undefined
  transport: StdioClientTransport | undefined
  tools: ReadonlyArray<McpToolEntry>
  message: string | null
  stderr: Buffer
  closing: boolean
  /** Listings started, and the number of the last one whose answer set `tools` (see listTools). */
  listings: number
  applied: number
}

/** A server's state before its process starts. */
export const notStarted = (name: string): Running => ({
  name,
  state: "starting",
  client: undefined,
  transport: undefined,
  tools: [],
  message: null,
  stderr: Buffer.alloc(0),
  closing: false,
  listings: 0,
  applied: 0
})

const messageOf = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

const appendTail = (tail: Buffer, chunk: Buffer): Buffer => {
  const joined = Buffer.concat([tail, chunk])
  return joined.length <= stderrTailBytes ? joined : joined.subarray(joined.length - stderrTailBytes)
}

/**
 * Lists every page of the server's tools and keeps those that can be offered. Two listings may run at
 * once (a second tools/list_changed before the first listing ends) and answer in any order: an answer
 * sets the list only if no listing started after it has set it already, so an older answer arriving
 * last cannot bring back a stale list, and a newer listing that fails does not cost an older answer.
 */
export const listTools = async (server: Running, client: Pick<Client, "listTools">): Promise<void> => {
  const listing = ++server.listings
  const entries: Array<McpToolEntry> = []
  const skipped: Array<string> = []
  let cursor: string | undefined
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor })
    for (const tool of page.tools) {
      const name = offeredName(server.name, tool.name)
      if (name === undefined) {
        skipped.push(tool.name)
        continue
      }
      entries.push({
        server: server.name,
        tool: tool.name,
        name,
        description: tool.description ?? tool.title ?? tool.name,
        inputSchema: tool.inputSchema,
        onProcessLoss: policyOf(tool.annotations)
      })
    }
    cursor = page.nextCursor
  } while (cursor !== undefined)
  if (listing < server.applied) return
  server.applied = listing
  server.tools = entries
  server.message =
    skipped.length === 0
      ? null
      : `not offered (a name must fit ^[A-Za-z0-9_-]{1,64}$ as <server>__<tool>): ${skipped.slice(0, 10).join(", ")}`
}

/**
 * The listing after a tools/list_changed. A failed one keeps the last list and says why in the
 * server's status, unless a listing started after it has set the list since.
 */
export const refreshTools = (server: Running, client: Pick<Client, "listTools">): Promise<void> => {
  const listing = server.listings + 1
  return listTools(server, client).catch((cause: unknown) => {
    // swallow-ok: a failed refresh keeps the last list; the reason is shown in the server's status.
    if (listing > server.applied) server.message = `could not list tools after tools/list_changed: ${messageOf(cause)}`
  })
}

const start = (name: string, config: McpServerConfig, server: Running): Promise<void> => {
  const transport = new StdioClientTransport({
    command: config.command,
    ...(config.args === undefined ? {} : { args: [...config.args] }),
    ...(config.env === undefined ? {} : { env: { ...config.env } }),
    ...(config.cwd === undefined ? {} : { cwd: config.cwd }),
    stderr: "pipe"
  })
  transport.stderr?.on("data", (chunk: Buffer) => {
    server.stderr = appendTail(server.stderr, chunk)
  })
  const client = new Client({ name: "orchestration", version: "0.1.0" })
  const ended = () => {
    if (server.closing || server.state === "failed" || server.state === "exited") return
    server.state = server.state === "starting" ? "failed" : "exited"
    server.tools = []
    server.message = `the server process ended${server.stderr.length > 0 ? "; see its stderr" : ""}`
  }
  client.onclose = ended
  server.transport = transport
  server.client = client
  return client
    .connect(transport)
    .then(async () => {
      watchExit(transport, ended)
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => refreshTools(server, client))
      await listTools(server, client)
      if (server.state === "starting") server.state = "ready"
    })
    .catch((cause: unknown) => {
      throw new Error(`${name}: ${messageOf(cause)}`)
    })
}

/** How long the pipes of a server whose process exited stay open for what it wrote before it ended. */
export const exitedPipesGraceMs = 1_000

/**
 * The SDK learns that a server ended only when its pipes close, which waits for every process holding
 * them: a wrapper script's helper, a tool it spawned. Until then the server looked ready and a call to
 * it waited for its timeout ("may or may not have taken effect"). So its process's exit is watched:
 * the server is marked ended at once, and after a grace for the answers still in the pipes our ends
 * are closed, which fails the calls in flight as `server-exited`. (The SDK keeps the child process in
 * a private field; McpServers.test.ts fails if a new SDK version renames it.)
 */
const watchExit = (transport: StdioClientTransport, ended: () => void) => {
  const child = (transport as unknown as { _process?: ChildProcess })._process
  if (child === undefined) return
  const onExit = () => {
    ended()
    setTimeout(() => {
      for (const stream of child.stdio) stream?.destroy()
    }, exitedPipesGraceMs).unref()
  }
  if (child.exitCode !== null || child.signalCode !== null) onExit()
  else child.once("exit", onExit)
}

const close = async (server: Running): Promise<void> => {
  server.closing = true
  // Closes stdin, then SIGTERM, then SIGKILL (the SDK's transport does the escalation).
  await server.client?.close()
}

const statusOf = (server: Running): McpServerStatus => ({
  name: server.name,
  state: server.state,
  pid: server.transport?.pid ?? null,
  tools: server.state === "ready" ? server.tools.length : 0,
  message: server.message,
  stderrTail: server.stderr.toString("utf8")
})

// ---------------------------------------------------------------------------------------------
// The service

export const make = (options: McpServersOptions) =>
  Effect.gen(function* () {
    const startTimeout = Duration.decode(options.startTimeout ?? "20 seconds")
    const resultBytes = options.resultBytes ?? defaultResultBytes
    const servers: Array<Running> = Object.keys(options.config.mcpServers).map((name) => notStarted(name))
    yield* Effect.addFinalizer(() =>
      Effect.forEach(
        servers,
        (server) => Effect.promise(() => close(server).catch(() => undefined)), // swallow-ok: a server that cannot be closed cleanly is killed by the transport; shutdown goes on.
        { concurrency: "unbounded", discard: true }
      )
    )
    // Servers start side by side; one that fails is recorded and logged, never fatal to the host.
    yield* Effect.forEach(
      servers,
      (server) =>
        Effect.tryPromise({
          try: (signal) => {
            signal.addEventListener("abort", () => void close(server).catch(() => undefined)) // swallow-ok: a start cut off (timeout, shutdown) closes what it began; the reason is recorded below.
            return start(server.name, options.config.mcpServers[server.name]!, server)
          },
          catch: (cause) => new McpServerStartFailure({ server: server.name, message: messageOf(cause) })
        }).pipe(
          Effect.timeoutFail({
            duration: startTimeout,
            onTimeout: () =>
              new McpServerStartFailure({
                server: server.name,
                message: `did not start within ${Duration.format(startTimeout)}`
              })
          }),
          Effect.catchAll((error) =>
            Effect.gen(function* () {
              server.state = "failed"
              server.tools = []
              server.message = `failed to start: ${error.message}`
              yield* Effect.promise(() => close(server).catch(() => undefined)) // swallow-ok: the server is already recorded as failed; closing only reaps its process.
              yield* Effect.logWarning(`MCP server '${server.name}' is unavailable: ${server.message}`, {
                stderrTail: server.stderr.toString("utf8")
              })
            })
          ),
          Effect.tap(() =>
            server.state === "ready"
              ? Effect.logInfo(`MCP server '${server.name}' ready with ${server.tools.length} tools`)
              : Effect.void
          )
        ),
      { concurrency: "unbounded", discard: true }
    )

    const find = (name: string) => servers.find((server) => server.name === name)

    const lookup: McpServersShape["lookup"] = (serverName, tool) =>
      Effect.suspend(() => {
        const fail = (reason: McpCallFailure, message: string) =>
          Effect.fail(new McpCallError({ server: serverName, tool, reason, message }))
        const server = find(serverName)
        if (server === undefined) return fail("unknown-server", `no MCP server named '${serverName}' is configured`)
        if (server.state !== "ready") {
          return fail(
            "server-unavailable",
            `MCP server '${serverName}' is ${server.state === "exited" ? "down (its process ended)" : `not available (${server.state})`}`
          )
        }
        const entry = server.tools.find((t) => t.tool === tool)
        return entry === undefined
          ? fail("unknown-tool", `MCP server '${serverName}' offers no tool named '${tool}'`)
          : Effect.succeed(entry)
      })

    const call: McpServersShape["call"] = (request) =>
      Effect.gen(function* () {
        const entry = yield* lookup(request.server, request.tool)
        const fail = (reason: McpCallFailure, message: string) =>
          new McpCallError({ server: entry.server, tool: entry.tool, reason, message })
        const args = request.arguments ?? {}
        if (typeof args !== "object" || Array.isArray(args)) {
          return yield* fail("invalid-arguments", `the arguments of ${entry.name} must be a JSON object`)
        }
        const client = find(entry.server)?.client
        if (client === undefined) return yield* fail("server-unavailable", `MCP server '${entry.server}' is down`)
        // The signal aborts when this fiber is interrupted: the SDK then sends notifications/cancelled.
        const answer = yield* Effect.tryPromise({
          try: (signal) =>
            client.callTool({ name: entry.tool, arguments: args as Record<string, unknown> }, undefined, {
              signal,
              timeout: request.timeoutMs,
              maxTotalTimeout: request.timeoutMs
            }),
          catch: (cause) =>
            cause instanceof McpError && cause.code === ErrorCode.RequestTimeout
              ? fail(
                  "timeout",
                  `${entry.name} did not answer within ${request.timeoutMs} ms (the request was cancelled); it may or may not have taken effect`
                )
              : cause instanceof McpError && cause.code === ErrorCode.ConnectionClosed
                ? fail(
                    "server-exited",
                    `MCP server '${entry.server}' ended while ${entry.name} ran; it may or may not have taken effect`
                  )
                : fail("protocol-error", `${entry.name}: ${messageOf(cause)}`)
        })
        const result: McpToolResult = {
          server: entry.server,
          tool: entry.tool,
          content: Array.isArray(answer.content) ? answer.content : [],
          isError: answer.isError === true,
          ...(answer.structuredContent === undefined ? {} : { structuredContent: answer.structuredContent })
        }
        return capResult(result, resultBytes)
      })

    return {
      tools: Effect.sync(() => servers.flatMap((server) => (server.state === "ready" ? server.tools : []))),
      statuses: Effect.sync(() => servers.map(statusOf)),
      lookup,
      call
    } satisfies McpServersShape
  })

/** Starts the servers of `config`; they are closed when the layer's scope closes. */
export const layer = (options: McpServersOptions): Layer.Layer<McpServers> => Layer.scoped(McpServers, make(options))

/** No servers: no MCP tools are offered. */
export const none: Layer.Layer<McpServers> = layer({ config: { mcpServers: {} } })
