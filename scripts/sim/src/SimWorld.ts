/**
 * The tools' world, simulated in memory: it outlives every crash of the engine (it is the outside
 * world), records each performance in order, and decides from the seed how long a handler takes, so
 * some run past their lease or their kind's timeout. A second performance of a process-bound effect
 * is visible here, and is what the "performed twice" invariant counts.
 */
import { Tools, World } from "@orchestration/agents"
import { Effect, Schema } from "effect"
import { createHash } from "node:crypto"
import type { Rng } from "./Rng.js"
import type { SimRuntime } from "./SimRuntime.js"
import type { Trace } from "./Trace.js"

export interface Performance {
  readonly effectId: string
  readonly kind: string
  readonly attempt: number
}

export interface SimWorldState {
  readonly performances: Array<Performance>
  readonly versions: Map<string, Array<string>>
  readonly blobs: Map<string, string>
  readonly triggers: Map<string, unknown>
  readonly executions: Array<{ effectId: string; command: string }>
}

export const emptyState = (): SimWorldState => ({
  performances: [],
  versions: new Map(),
  blobs: new Map(),
  triggers: new Map(),
  executions: []
})

const decode = <A, I>(schema: Schema.Schema<A, I>, tool: string, raw: unknown) =>
  Schema.decodeUnknown(schema)(raw).pipe(
    Effect.mapError((e) => new World.ToolInputError({ tool, message: `invalid arguments: ${e.message}` }))
  )

/** How long a performance takes: usually moments, sometimes past the lease (30 s) or the kind's timeout. */
const durationOf = (rng: Rng, kind: string): number => {
  const roll = rng.next()
  if (roll < 0.7) return rng.int(2_000)
  if (roll < 0.92) return 2_000 + rng.int(20_000)
  // Slow: past the 30 s lease (renewed while running) and, for publish (30 s) and mcp_call (60 s), past the timeout.
  return kind === "tool.execute" ? 40_000 + rng.int(60_000) : 35_000 + rng.int(60_000)
}

export const make = (state: SimWorldState, rng: Rng, runtime: SimRuntime, trace: Trace): World.WorldShape => {
  const recordPerformance: World.WorldShape["recordPerformance"] = (entry) =>
    Effect.sync(() => {
      state.performances.push({ effectId: entry.effectId, kind: entry.kind, attempt: entry.attempt })
      trace.add("perform", `${entry.effectId} ${entry.kind} #${entry.attempt}`)
      return { ...entry, at: new Date(runtime.now).toISOString() }
    })

  const takeTime = (kind: string) => Effect.sleep(durationOf(rng, kind))

  const publish: World.WorldShape["publish"] = (raw) =>
    Effect.gen(function* () {
      const input = yield* decode(Tools.PublishInput, "publish", raw)
      yield* takeTime("tool.publish")
      const cid = createHash("sha256").update(input.content).digest("hex")
      state.blobs.set(cid, input.content)
      const versions = state.versions.get(input.path) ?? []
      const newVersion = versions.at(-1) !== cid
      if (newVersion) versions.push(cid)
      state.versions.set(input.path, versions)
      return { path: input.path, cid, newVersion }
    })

  const execute: World.WorldShape["execute"] = (raw, context) =>
    Effect.gen(function* () {
      const input = yield* decode(Tools.ExecuteInput, "execute", raw)
      state.executions.push({ effectId: context.effectId, command: input.command })
      const ms = durationOf(rng, "tool.execute")
      yield* Effect.sleep(ms)
      return {
        exitCode: 0,
        signal: null,
        stdout: `ran ${input.command}`,
        stderr: "",
        stdoutBytes: input.command.length + 4,
        stderrBytes: 0,
        truncated: false,
        durationMs: ms
      }
    })

  const triggerEdit: World.WorldShape["triggerEdit"] = (raw) =>
    Effect.gen(function* () {
      const input = yield* decode(Tools.TriggerEditInput, "trigger_edit", raw)
      yield* takeTime("tool.trigger_edit")
      state.triggers.set(input.triggerId, input.spec)
      return { triggerId: input.triggerId, path: `triggers/${input.triggerId}.json` }
    })

  const perform: World.WorldShape["perform"] = (request) =>
    Effect.gen(function* () {
      const kind = Tools.toolKind(request.tool)
      const ledger = { effectId: request.effectId, kind, attempt: request.attempt }
      const context = { effectId: request.effectId, threadId: request.threadId }
      switch (request.tool) {
        case "publish": {
          const input = yield* decode(Tools.PublishInput, request.tool, request.arguments)
          yield* recordPerformance(ledger)
          return yield* publish(input)
        }
        case "execute": {
          const input = yield* decode(Tools.ExecuteInput, request.tool, request.arguments)
          yield* recordPerformance(ledger)
          return yield* execute(input, context)
        }
        case "trigger_edit": {
          const input = yield* decode(Tools.TriggerEditInput, request.tool, request.arguments)
          yield* recordPerformance(ledger)
          return yield* triggerEdit(input)
        }
      }
    })

  return {
    dir: "sim://world",
    recordPerformance,
    perform,
    publish,
    execute,
    triggerEdit,
    readLedger: Effect.sync(() => state.performances.map((p) => ({ ...p, at: "" }))),
    readVersions: (path) => Effect.sync(() => (state.versions.get(path) ?? []).map((cid) => ({ cid }))),
    readBlob: (cid) => Effect.sync(() => state.blobs.get(cid) ?? ""),
    readExecutions: Effect.sync(() => [...state.executions]),
    readTrigger: (triggerId) => Effect.sync(() => state.triggers.get(triggerId))
  }
}
