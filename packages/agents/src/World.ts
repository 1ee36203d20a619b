/**
 * The world the tools act on: a directory whose files show, from outside the process, what really
 * happened. Before each performance a ledger line is appended, so a crash after that line reads as
 * "may have happened"; the performers then change the world in ways a test can count (versions,
 * executions, triggers). Every write failure is a typed error: nothing here logs and
 * continues, because a swallowed write error is the bug this project exists to end.
 */
import { Reactor } from "@orchestration/engine"
import { Clock, Context, Duration, Effect, Layer, Schema } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs/promises"
import * as nodePath from "node:path"
import * as OsErrors from "./OsErrors.js"
import * as Sandbox from "./Sandbox.js"
import * as SandboxOrphans from "./SandboxOrphans.js"
import {
  ExecuteInput,
  PublishInput,
  type ToolName,
  toolKind,
  TriggerEditInput,
  toolPolicies,
  TriggerId,
  WorldPath
} from "./Tools.js"
import * as WorldFs from "./WorldFs.js"
import { type WorldReadError, WorldWriteError } from "./WorldFs.js"

export { WorldReadError, WorldWriteError } from "./WorldFs.js"

// ---------------------------------------------------------------------------------------------
// Errors

/** The tool's arguments are not acceptable; the model sees this as the call's error result. */
export class ToolInputError extends Schema.TaggedError<ToolInputError>()("ToolInputError", {
  tool: Schema.String,
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
  at: Schema.String,
  /** Written when the kind's policy is decided per call (an MCP tool's), so a check can read it here. */
  onProcessLoss: Schema.optional(Reactor.ProcessLossPolicy)
})
export type LedgerEntry = typeof LedgerEntry.Type

/** One line of `versions/<path>.jsonl`: the content id of a published version. */
export const VersionEntry = Schema.Struct({ cid: Schema.String })
export type VersionEntry = typeof VersionEntry.Type

/** One line of `executions.jsonl`: a sandbox run is about to start. */
export const ExecutionEntry = Schema.Struct({ effectId: Schema.String, command: Schema.String })
export type ExecutionEntry = typeof ExecutionEntry.Type

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
    readonly onProcessLoss?: Reactor.ProcessLossPolicy
  }) => Effect.Effect<LedgerEntry, WorldWriteError>
  /** Decodes the arguments, records the ledger line, then performs: the path reactors use. */
  readonly perform: (request: PerformRequest) => Effect.Effect<unknown, WorldError>
  readonly publish: (input: PublishInput) => Effect.Effect<PublishResult, WorldError>
  readonly execute: (
    input: ExecuteInput,
    context: { readonly effectId: string; readonly threadId: string }
  ) => Effect.Effect<ExecuteResult, ToolInputError | WorldWriteError | Sandbox.SandboxUnavailable>
  readonly triggerEdit: (input: TriggerEditInput) => Effect.Effect<TriggerEditResult, ToolInputError | WorldWriteError>
  // Read-back, for tests and operators. A file that does not exist yet reads as empty.
  readonly readLedger: Effect.Effect<ReadonlyArray<LedgerEntry>, WorldReadError>
  readonly readVersions: (path: string) => Effect.Effect<ReadonlyArray<VersionEntry>, ToolInputError | WorldReadError>
  readonly readBlob: (cid: string) => Effect.Effect<string, WorldReadError>
  readonly readExecutions: Effect.Effect<ReadonlyArray<ExecutionEntry>, WorldReadError>
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
  Effect.gen(function* () {
    const dir = yield* openRoot(options.dir)
    const ledgerPath = "ledger.jsonl"
    const executionsPath = "executions.jsonl"
    const versionsPath = (path: string) => `versions/${path}.jsonl`
    const blobPath = (cid: string) => `blobs/${cid}`
    const triggerPath = (triggerId: string) => `triggers/${triggerId}.json`
    const sandbox = options.sandbox ?? Sandbox.defaultConfig
    if (sandbox.mode === "bwrap" && process.platform === "linux")
      yield* SandboxOrphans.sweep(nodePath.join(dir, "workspaces"))
    const workspaceOf = (threadId: string) =>
      Sandbox.prepareWorkspace(sandbox, nodePath.join(dir, "workspaces"), threadId)
    // Reading the last version and appending the next is one step per versions file, or two
    // publishes of one content could both find it missing and append it twice in a row. The lock
    // is this process's: processes sharing one world directory are not serialized with each other.
    const versionLocks = yield* Effect.forEach(Array.from({ length: versionLockStripes }), () =>
      Effect.makeSemaphore(1)
    )
    const versionLock = (path: string) => versionLocks[stripeOf(path)]!

    const recordPerformance: WorldShape["recordPerformance"] = Effect.fn("World.recordPerformance")(function* (entry) {
      const now = yield* Clock.currentTimeMillis
      const line: LedgerEntry = {
        effectId: entry.effectId,
        kind: entry.kind,
        attempt: entry.attempt,
        at: new Date(now).toISOString(),
        ...(entry.onProcessLoss === undefined ? {} : { onProcessLoss: entry.onProcessLoss })
      }
      yield* WorldFs.appendLine(dir, ledgerPath, line, "record performance")
      return line
    })

    const publish: WorldShape["publish"] = Effect.fn("World.publish")(function* (raw) {
      const input = yield* decodeInput(PublishInput, "publish", raw)
      const cid = createHash("sha256").update(input.content, "utf8").digest("hex")
      const file = versionsPath(input.path)
      return yield* Effect.gen(function* () {
        // Blob first: a version line never names content that is not on disk. A blob that exists
        // already holds this content (its name is its hash), so it is not written again.
        yield* WorldFs.writeFileAtomic(dir, blobPath(cid), input.content, {
          operation: "publish blob",
          keepExisting: true
        })
        const newVersion = yield* versionLock(file).withPermits(1)(
          Effect.gen(function* () {
            const versions = yield* readLines(dir, file, VersionEntry)
            if (versions.at(-1)?.cid === cid) return false
            yield* WorldFs.appendLine(dir, file, { cid }, "publish version")
            return true
          })
        )
        return { path: input.path, cid, newVersion }
      }).pipe(Effect.mapError((error) => aboutPath(error, `cannot publish '${input.path}'`)))
    })

    const execute: WorldShape["execute"] = Effect.fn("World.execute")(function* (raw, context) {
      const input = yield* decodeInput(ExecuteInput, "execute", raw)
      const workspace = yield* workspaceOf(context.threadId)
      // Recorded before the process starts: from here on the command may have acted.
      yield* WorldFs.appendLine(dir, executionsPath, { effectId: context.effectId, command: input.command }, "execute")
      return yield* Sandbox.run(sandbox, {
        command: input.command,
        workspace,
        timeoutMs: executeWallClockMs(input, sandbox)
      })
    })

    const triggerEdit: WorldShape["triggerEdit"] = Effect.fn("World.triggerEdit")(function* (raw) {
      const input = yield* decodeInput(TriggerEditInput, "trigger_edit", raw)
      yield* WorldFs.writeFileAtomic(dir, triggerPath(input.triggerId), `${JSON.stringify(input.spec)}\n`, {
        operation: "trigger_edit",
        keepExisting: false
      })
      return { triggerId: input.triggerId, path: triggerPath(input.triggerId) }
    })

    const perform: WorldShape["perform"] = Effect.fn("World.perform")(function* (request) {
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
      }
    })

    const readVersions: WorldShape["readVersions"] = (path) =>
      decodeInput(WorldPath, "publish", path).pipe(
        Effect.flatMap((valid) => readLines(dir, versionsPath(valid), VersionEntry))
      )

    const readBlob: WorldShape["readBlob"] = (cid) =>
      /^[0-9a-f]{64}$/.test(cid)
        ? readExisting(dir, blobPath(cid))
        : Effect.fail(WorldFs.readError(cid, "INVALID_CID", `not a sha256 content id: ${cid}`))

    const readTrigger: WorldShape["readTrigger"] = (triggerId) =>
      decodeInput(TriggerId, "trigger_edit", triggerId).pipe(
        Effect.flatMap((valid) => readExisting(dir, triggerPath(valid))),
        Effect.flatMap((text) =>
          Effect.try({
            try: (): unknown => JSON.parse(text),
            catch: (cause) => WorldFs.readError(triggerPath(triggerId), "MALFORMED_FILE", String(cause))
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
      readLedger: readLines(dir, ledgerPath, LedgerEntry),
      readVersions,
      readBlob,
      readExecutions: readLines(dir, executionsPath, ExecutionEntry),
      readTrigger
    } satisfies WorldShape
  })

export const layer = (options: WorldOptions): Layer.Layer<World, WorldWriteError> => Layer.effect(World, make(options))

// ---------------------------------------------------------------------------------------------
// Helpers

/** Striped locks: bounded memory however many paths are published, rare sharing between paths. */
const versionLockStripes = 64

const stripeOf = (path: string): number => {
  let hash = 0
  for (let i = 0; i < path.length; i++) hash = (hash * 31 + path.charCodeAt(i)) >>> 0
  return hash % versionLockStripes
}

/**
 * The root is the operator's choice (it may itself be a link, to another volume): it is created
 * and resolved once, and nothing below it is followed again.
 */
const openRoot = (dir: string): Effect.Effect<string, WorldWriteError> => {
  const root = nodePath.resolve(dir)
  return Effect.tryPromise({
    try: async () => {
      await fs.mkdir(root, { recursive: true })
      return await fs.realpath(root)
    },
    catch: (cause) => {
      const code = OsErrors.codeOf(cause)
      return new WorldWriteError({
        operation: "open world",
        path: root,
        code,
        reason: OsErrors.classify(code),
        message: `the world directory ${root} ${OsErrors.describe(code)} (${code})`
      })
    }
  })
}

const decodeInput = <A, I>(
  schema: Schema.Schema<A, I, never>,
  tool: string,
  input: unknown
): Effect.Effect<A, ToolInputError> =>
  Schema.decodeUnknown(schema)(input).pipe(
    Effect.mapError((error) => new ToolInputError({ tool, message: error.message }))
  )

/**
 * Says which world path a failed publish is about, so the model knows which of its choices to
 * change. Reading the versions back is part of the write, so its failure is the write's failure.
 */
const aboutPath = (
  error: ToolInputError | WorldWriteError | WorldReadError,
  prefix: string
): ToolInputError | WorldWriteError => {
  if (error._tag === "ToolInputError") return error
  const advice = error.reason === "permanent" ? "; retrying will not help, choose another path" : ""
  const message = `${prefix}: ${error.message}${advice}`
  const operation = error._tag === "WorldWriteError" ? error.operation : "publish version"
  return new WorldWriteError({ operation, path: error.path, code: error.code, reason: error.reason, message })
}

/** A file that must exist: missing is an error (ENOENT), unlike a JSON-lines file with no lines yet. */
const readExisting = (dir: string, path: string): Effect.Effect<string, WorldReadError> =>
  WorldFs.readText(dir, path).pipe(
    Effect.flatMap((text) =>
      text === undefined
        ? Effect.fail(WorldFs.readError(path, "ENOENT", `${path} does not exist`))
        : Effect.succeed(text)
    )
  )

/** Reads a JSON-lines file; a missing file has no lines yet. A malformed line is an error. */
const readLines = <A, I>(
  dir: string,
  path: string,
  schema: Schema.Schema<A, I, never>
): Effect.Effect<ReadonlyArray<A>, WorldReadError> =>
  WorldFs.readText(dir, path).pipe(
    Effect.flatMap((text) =>
      Effect.forEach(
        (text ?? "").split("\n").filter((line) => line.length > 0),
        (line, index) =>
          Schema.decodeUnknown(Schema.parseJson(schema))(line).pipe(
            Effect.mapError((error) => WorldFs.readError(path, "MALFORMED_LINE", `line ${index + 1}: ${error.message}`))
          )
      )
    )
  )
