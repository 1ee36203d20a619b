/**
 * The world the tools act on: a directory whose files show, from outside the process, what really
 * happened. Before each performance a ledger line is appended, so a crash after that line reads as
 * "may have happened"; the performers then change the world in ways a test can count (versions,
 * executions, triggers, MCP calls). Every write failure is a typed error: nothing here logs and
 * continues, because a swallowed write error is the bug this project exists to end.
 */
import { Clock, Context, Duration, Effect, Layer, Schema } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs/promises"
import * as nodePath from "node:path"
import * as Sandbox from "./Sandbox.js"
import {
  ExecuteInput,
  McpCallInput,
  PublishInput,
  type ToolName,
  toolKind,
  TriggerEditInput,
  toolPolicies,
  TriggerId,
  WorldPath
} from "./Tools.js"

// ---------------------------------------------------------------------------------------------
// Errors

/** The tool's arguments are not acceptable; the model sees this as the call's error result. */
export class ToolInputError extends Schema.TaggedError<ToolInputError>()("ToolInputError", {
  tool: Schema.String,
  message: Schema.String
}) {}

/** A write to the world directory was refused (`code` is the OS error code, e.g. ENOSPC). */
export class WorldWriteError extends Schema.TaggedError<WorldWriteError>()("WorldWriteError", {
  operation: Schema.String,
  path: Schema.String,
  code: Schema.String,
  message: Schema.String
}) {}

/** Reading the world back failed, or a line in it is not what we wrote. */
export class WorldReadError extends Schema.TaggedError<WorldReadError>()("WorldReadError", {
  path: Schema.String,
  code: Schema.String,
  message: Schema.String
}) {}

export type WorldError = ToolInputError | WorldWriteError | WorldReadError | Sandbox.SandboxUnavailable

// ---------------------------------------------------------------------------------------------
// What the world files hold

/** One line of `ledger.jsonl`: a performance is about to start. `at` is ISO time from the Clock. */
export const LedgerEntry = Schema.Struct({
  effectId: Schema.String,
  kind: Schema.String,
  attempt: Schema.Int,
  at: Schema.String
})
export type LedgerEntry = typeof LedgerEntry.Type

/** One line of `versions/<path>.jsonl`: the content id of a published version. */
export const VersionEntry = Schema.Struct({ cid: Schema.String })
export type VersionEntry = typeof VersionEntry.Type

/** One line of `executions.jsonl`: a sandbox run is about to start. */
export const ExecutionEntry = Schema.Struct({ effectId: Schema.String, command: Schema.String })
export type ExecutionEntry = typeof ExecutionEntry.Type

/** One line of `mcp.jsonl`: a simulated MCP call was made. */
export const McpCallEntry = Schema.Struct({
  effectId: Schema.String,
  server: Schema.String,
  tool: Schema.String,
  arguments: Schema.Record({ key: Schema.String, value: Schema.Unknown })
})
export type McpCallEntry = typeof McpCallEntry.Type

// ---------------------------------------------------------------------------------------------
// Results the model sees

export interface PublishResult {
  readonly path: string
  readonly cid: string
  /** False when the latest version already had this content: nothing new was recorded. */
  readonly newVersion: boolean
}

export type ExecuteResult = Sandbox.SandboxResult

export interface TriggerEditResult {
  readonly triggerId: string
  readonly path: string
}

export interface McpCallResult {
  readonly server: string
  readonly tool: string
  readonly content: ReadonlyArray<{ readonly type: "text"; readonly text: string }>
}

/** The tools performed on the world; `delegate` goes through the engine instead. */
export type WorldToolName = Exclude<ToolName, "delegate">

export interface PerformRequest {
  readonly effectId: string
  readonly attempt: number
  /** The thread the call belongs to: `execute` runs in its workspace. */
  readonly threadId: string
  readonly tool: WorldToolName
  /** The raw arguments from the model; decoded here, so bad ones become a ToolInputError. */
  readonly arguments: unknown
}

// ---------------------------------------------------------------------------------------------
// The service

export interface WorldShape {
  readonly dir: string
  /** Appends `{ effectId, kind, attempt, at }` to `ledger.jsonl` in one O_APPEND write. */
  readonly recordPerformance: (entry: {
    readonly effectId: string
    readonly kind: string
    readonly attempt: number
  }) => Effect.Effect<LedgerEntry, WorldWriteError>
  /** Decodes the arguments, records the ledger line, then performs: the path reactors use. */
  readonly perform: (request: PerformRequest) => Effect.Effect<unknown, WorldError>
  readonly publish: (input: PublishInput) => Effect.Effect<PublishResult, WorldError>
  /** Runs the command in the thread's sandbox workspace; interrupting it stops the command. */
  readonly execute: (
    input: ExecuteInput,
    context: { readonly effectId: string; readonly threadId: string }
  ) => Effect.Effect<ExecuteResult, ToolInputError | WorldWriteError | Sandbox.SandboxUnavailable>
  readonly triggerEdit: (input: TriggerEditInput) => Effect.Effect<TriggerEditResult, ToolInputError | WorldWriteError>
  readonly mcpCall: (
    input: McpCallInput,
    context: { readonly effectId: string }
  ) => Effect.Effect<McpCallResult, ToolInputError | WorldWriteError>
  // Read-back, for tests and operators. A file that does not exist yet reads as empty.
  readonly readLedger: Effect.Effect<ReadonlyArray<LedgerEntry>, WorldReadError>
  readonly readVersions: (path: string) => Effect.Effect<ReadonlyArray<VersionEntry>, ToolInputError | WorldReadError>
  readonly readBlob: (cid: string) => Effect.Effect<string, WorldReadError>
  readonly readExecutions: Effect.Effect<ReadonlyArray<ExecutionEntry>, WorldReadError>
  readonly readMcpCalls: Effect.Effect<ReadonlyArray<McpCallEntry>, WorldReadError>
  readonly readTrigger: (triggerId: string) => Effect.Effect<unknown, ToolInputError | WorldReadError>
}

export class World extends Context.Tag("agents/World")<World, WorldShape>() {}

export interface WorldOptions {
  readonly dir: string
  /** How `execute` runs commands; default: bubblewrap with the default limits. */
  readonly sandbox?: Sandbox.SandboxConfig
}

/**
 * The wall clock of a run: the kind's timeout, lowered by `timeoutSeconds`, less the kill grace, so
 * the run is stopped and its result reported before the engine gives up on the effect.
 */
export const executeWallClockMs = (input: ExecuteInput, sandbox: Sandbox.SandboxConfig): number => {
  const kindMs = Duration.toMillis(toolPolicies["tool.execute"].timeout) - sandbox.killGraceMs - 1_000
  return Math.max(1_000, Math.min(kindMs, (input.timeoutSeconds ?? Infinity) * 1_000))
}

/** Opens the world at `dir`, creating the directory; a refused creation fails the layer, typed. */
export const make = (options: WorldOptions): Effect.Effect<WorldShape, WorldWriteError> =>
  Effect.gen(function*() {
    const dir = nodePath.resolve(options.dir)
    yield* ensureDir(dir, "open world")
    const at = (...segments: ReadonlyArray<string>) => nodePath.join(dir, ...segments)
    const ledgerPath = at("ledger.jsonl")
    const executionsPath = at("executions.jsonl")
    const mcpPath = at("mcp.jsonl")
    const versionsPath = (path: string) => at("versions", `${path}.jsonl`)
    const blobPath = (cid: string) => at("blobs", cid)
    const triggerPath = (triggerId: string) => at("triggers", `${triggerId}.json`)
    const sandbox = options.sandbox ?? Sandbox.defaultConfig
    const workspaceOf = (threadId: string) => Sandbox.prepareWorkspace(sandbox, at("workspaces"), threadId)

    const recordPerformance: WorldShape["recordPerformance"] = Effect.fn("World.recordPerformance")(
      function*(entry) {
        const now = yield* Clock.currentTimeMillis
        const line: LedgerEntry = {
          effectId: entry.effectId,
          kind: entry.kind,
          attempt: entry.attempt,
          at: new Date(now).toISOString()
        }
        yield* appendLine(ledgerPath, line, "record performance")
        return line
      }
    )

    const publish: WorldShape["publish"] = Effect.fn("World.publish")(function*(raw) {
      const input = yield* decodeInput(PublishInput, "publish", raw)
      const cid = createHash("sha256").update(input.content, "utf8").digest("hex")
      // Blob first: a version line never names content that is not on disk.
      yield* ensureDir(at("blobs"), "publish")
      yield* writeFileAtomic(blobPath(cid), input.content, "publish blob")
      const file = versionsPath(input.path)
      const versions = yield* readLines(file, VersionEntry)
      if (versions.at(-1)?.cid === cid) return { path: input.path, cid, newVersion: false }
      yield* ensureDir(nodePath.dirname(file), "publish")
      yield* appendLine(file, { cid }, "publish version")
      return { path: input.path, cid, newVersion: true }
    })

    const execute: WorldShape["execute"] = Effect.fn("World.execute")(function*(raw, context) {
      const input = yield* decodeInput(ExecuteInput, "execute", raw)
      const workspace = yield* workspaceOf(context.threadId)
      // Recorded before the process starts: from here on the command may have acted.
      yield* appendLine(executionsPath, { effectId: context.effectId, command: input.command }, "execute")
      return yield* Sandbox.run(sandbox, { command: input.command, workspace, timeoutMs: executeWallClockMs(input, sandbox) })
    })

    const triggerEdit: WorldShape["triggerEdit"] = Effect.fn("World.triggerEdit")(function*(raw) {
      const input = yield* decodeInput(TriggerEditInput, "trigger_edit", raw)
      yield* ensureDir(at("triggers"), "trigger_edit")
      yield* writeFileAtomic(triggerPath(input.triggerId), `${JSON.stringify(input.spec)}\n`, "trigger_edit")
      return { triggerId: input.triggerId, path: `triggers/${input.triggerId}.json` }
    })

    const mcpCall: WorldShape["mcpCall"] = Effect.fn("World.mcpCall")(function*(raw, context) {
      const input = yield* decodeInput(McpCallInput, "mcp_call", raw)
      yield* appendLine(
        mcpPath,
        { effectId: context.effectId, server: input.server, tool: input.tool, arguments: input.arguments },
        "mcp_call"
      )
      return {
        server: input.server,
        tool: input.tool,
        content: [{ type: "text" as const, text: `simulated ${input.server}/${input.tool}` }]
      }
    })

    const perform: WorldShape["perform"] = Effect.fn("World.perform")(function*(request) {
      const kind = toolKind(request.tool)
      const ledger = { effectId: request.effectId, kind, attempt: request.attempt }
      const context = { effectId: request.effectId, threadId: request.threadId }
      // Arguments are decoded before the ledger line: refused input never started a performance.
      switch (request.tool) {
        case "publish": {
          const input = yield* decodeInput(PublishInput, request.tool, request.arguments)
          yield* recordPerformance(ledger)
          return yield* publish(input)
        }
        case "execute": {
          const input = yield* decodeInput(ExecuteInput, request.tool, request.arguments)
          // A sandbox that cannot run is a refusal before the ledger line: nothing started.
          const refusal = Sandbox.unavailable(sandbox)
          if (refusal !== undefined) return yield* refusal
          yield* workspaceOf(request.threadId)
          yield* recordPerformance(ledger)
          return yield* execute(input, context)
        }
        case "trigger_edit": {
          const input = yield* decodeInput(TriggerEditInput, request.tool, request.arguments)
          yield* recordPerformance(ledger)
          return yield* triggerEdit(input)
        }
        case "mcp_call": {
          const input = yield* decodeInput(McpCallInput, request.tool, request.arguments)
          yield* recordPerformance(ledger)
          return yield* mcpCall(input, context)
        }
      }
    })

    const readVersions: WorldShape["readVersions"] = (path) =>
      decodeInput(WorldPath, "publish", path).pipe(Effect.flatMap((valid) => readLines(versionsPath(valid), VersionEntry)))

    const readBlob: WorldShape["readBlob"] = (cid) =>
      /^[0-9a-f]{64}$/.test(cid)
        ? Effect.tryPromise({
          try: () => fs.readFile(blobPath(cid), "utf8"),
          catch: (cause) => readError(blobPath(cid), cause)
        })
        : Effect.fail(new WorldReadError({ path: cid, code: "INVALID_CID", message: `not a sha256 content id: ${cid}` }))

    const readTrigger: WorldShape["readTrigger"] = (triggerId) =>
      decodeInput(TriggerId, "trigger_edit", triggerId).pipe(
        Effect.flatMap((valid) =>
          Effect.tryPromise({
            try: () => fs.readFile(triggerPath(valid), "utf8"),
            catch: (cause) => readError(triggerPath(valid), cause)
          })
        ),
        Effect.flatMap((text) =>
          Effect.try({
            try: (): unknown => JSON.parse(text),
            catch: (cause) => readError(triggerPath(triggerId), cause)
          })
        )
      )

    return {
      dir,
      recordPerformance,
      perform,
      publish,
      execute,
      triggerEdit,
      mcpCall,
      readLedger: readLines(ledgerPath, LedgerEntry),
      readVersions,
      readBlob,
      readExecutions: readLines(executionsPath, ExecutionEntry),
      readMcpCalls: readLines(mcpPath, McpCallEntry),
      readTrigger
    } satisfies WorldShape
  })

export const layer = (options: WorldOptions): Layer.Layer<World, WorldWriteError> =>
  Layer.effect(World, make(options))

// ---------------------------------------------------------------------------------------------
// File primitives. Errors are mapped here, once, at the boundary that owns them.

const decodeInput = <A, I>(
  schema: Schema.Schema<A, I, never>,
  tool: string,
  input: unknown
): Effect.Effect<A, ToolInputError> =>
  Schema.decodeUnknown(schema)(input).pipe(
    Effect.mapError((error) => new ToolInputError({ tool, message: error.message }))
  )

const errorCode = (cause: unknown): string =>
  typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
    ? cause.code
    : "UNKNOWN"

const errorMessage = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

const writeError = (operation: string, path: string) => (cause: unknown) =>
  new WorldWriteError({ operation, path, code: errorCode(cause), message: errorMessage(cause) })

const readError = (path: string, cause: unknown) =>
  new WorldReadError({ path, code: errorCode(cause), message: errorMessage(cause) })

const ensureDir = (path: string, operation: string): Effect.Effect<void, WorldWriteError> =>
  Effect.tryPromise({
    try: () => fs.mkdir(path, { recursive: true }),
    catch: writeError(operation, path)
  })

/**
 * One line, one `write(2)` on a descriptor opened with O_APPEND: concurrent appenders and a crash
 * can leave the line whole or absent, never interleaved with another.
 */
const appendLine = (path: string, value: unknown, operation: string): Effect.Effect<void, WorldWriteError> =>
  Effect.tryPromise({
    try: () => fs.appendFile(path, `${JSON.stringify(value)}\n`, { flag: "a" }),
    catch: writeError(operation, path)
  })

/** Written beside the target and renamed over it, so a reader never sees half a file. */
const writeFileAtomic = (path: string, content: string, operation: string): Effect.Effect<void, WorldWriteError> => {
  const partial = `${path}.partial`
  return Effect.tryPromise({
    try: async () => {
      await fs.writeFile(partial, content, "utf8")
      await fs.rename(partial, path)
    },
    catch: writeError(operation, path)
  })
}

/** Reads a JSON-lines file; a missing file has no lines yet. A malformed line is an error. */
const readLines = <A, I>(
  path: string,
  schema: Schema.Schema<A, I, never>
): Effect.Effect<ReadonlyArray<A>, WorldReadError> =>
  Effect.tryPromise({
    try: () => fs.readFile(path, "utf8"),
    catch: (cause) => readError(path, cause)
  }).pipe(
    Effect.catchIf(
      (error) => error.code === "ENOENT",
      () => Effect.succeed("")
    ),
    Effect.flatMap((text) =>
      Effect.forEach(
        text.split("\n").filter((line) => line.length > 0),
        (line, index) =>
          Schema.decodeUnknown(Schema.parseJson(schema))(line).pipe(
            Effect.mapError((error) =>
              new WorldReadError({ path, code: "MALFORMED_LINE", message: `line ${index + 1}: ${error.message}` })
            )
          )
      )
    )
  )
