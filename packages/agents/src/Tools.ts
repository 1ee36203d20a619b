/**
 * The tools the model can call: their input schemas, their definitions as the provider sees them,
 * and the one table of effect kinds with their policy after process loss, lane and timeout.
 * Everything that performs or schedules a tool reads this module, so a tool is declared once.
 */
import type { Reactor } from "@orchestration/engine"
import { Duration, Schema } from "effect"
import { recordedPolicy } from "./McpTools.js"

/** Tool names match what OpenAI accepts: `^[a-zA-Z0-9_-]+$`. */
/** The built-in tools; an operator's MCP tools are offered besides them as `<server>__<tool>` (McpTools.ts). */
export const ToolName = Schema.Literal("publish", "execute", "delegate", "trigger_edit")
export type ToolName = typeof ToolName.Type

export const toolNames: ReadonlyArray<ToolName> = ToolName.literals

export const isToolName = (name: string): name is ToolName => (toolNames as ReadonlyArray<string>).includes(name)

const maxSegmentBytes = 255 - ".jsonl".length

/** Why a world path is refused, or undefined when it is acceptable. */
export const worldPathProblem = (path: string): string | undefined => {
  if (path.length === 0) return "path is empty"
  if (path.length > 256) return `path is ${path.length} characters long; at most 256 are allowed`
  if (path.includes("\0")) return "path contains a NUL character"
  if (path.includes("\\")) return "path contains a backslash; use / as the separator"
  if (path.startsWith("/") || /^[A-Za-z]:/.test(path)) return "path must be relative"
  // Segments, not substrings: `a..b.md` is a file name, `../x` escapes the world directory.
  for (const segment of path.split("/")) {
    if (segment === "..") return "path must not contain a .. segment"
    if (segment === "." || segment === "") return "path must not contain empty or . segments"
    // Versions live in `<segment>.jsonl`, and file systems cap a name at 255 bytes.
    if (Buffer.byteLength(segment, "utf8") > maxSegmentBytes) {
      return `a path segment is longer than ${maxSegmentBytes} bytes`
    }
  }
  return undefined
}

/**
 * A path inside the world directory: relative, no `..` segment, at most 256 characters, each
 * segment at most 249 bytes (so its versions file name fits).
 */
export const WorldPath = Schema.String.pipe(
  Schema.filter((path) => worldPathProblem(path) ?? true, {
    jsonSchema: {
      type: "string",
      maxLength: 256,
      description: "a relative path without .. segments, at most 256 characters"
    },
    description: "a relative path without .. segments, at most 256 characters"
  })
)

/** Trigger ids become file names, so they are restricted to a safe alphabet. */
export const TriggerId = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/, {
    description: "letters, digits, '_', '-', '.' (not first), at most 128 characters"
  })
)

const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })

export const PublishInput = Schema.Struct({
  path: WorldPath,
  content: Schema.String
})
export type PublishInput = typeof PublishInput.Type

/** Ten minutes, the kind's timeout: a run's wall clock may only be lowered below it. */
export const maxExecuteTimeoutSeconds = 600

export const ExecuteInput = Schema.Struct({
  command: Schema.NonEmptyString,
  timeoutSeconds: Schema.optional(Schema.Int.pipe(Schema.between(1, maxExecuteTimeoutSeconds)))
})
export type ExecuteInput = typeof ExecuteInput.Type

/** A day: the longest an awaited delegate may keep its call open. */
export const maxDelegateTimeoutSeconds = 86_400

export const DelegateInput = Schema.Struct({
  threadId: Schema.NonEmptyString,
  text: Schema.String,
  /** Keep the call open until the other thread's turn for this message ends (Delegation.ts). */
  await: Schema.optional(Schema.Boolean),
  /** With `await`: how long to wait before the call's result says it timed out (default 30 minutes). */
  timeoutSeconds: Schema.optional(Schema.Int.pipe(Schema.between(1, maxDelegateTimeoutSeconds)))
})
export type DelegateInput = typeof DelegateInput.Type

/** `spec` is checked as a TriggerSpec (`{ cron, timezone?, threadId, text }`) when it is put; null deletes. */
export const TriggerEditInput = Schema.Struct({
  triggerId: TriggerId,
  spec: Schema.NullOr(JsonObject)
})
export type TriggerEditInput = typeof TriggerEditInput.Type

/** A tool as a provider sees it: name, what it does, and the schema of its arguments. */
export interface ToolDefinition {
  readonly name: string
  readonly description: string
  readonly input: Schema.Schema<any, any, never>
}

export const toolDefinitions: ReadonlyArray<ToolDefinition & { readonly name: ToolName }> = [
  {
    name: "publish",
    description: "Publish content at a path in the world. Publishing the same content again changes nothing.",
    input: PublishInput
  },
  {
    name: "execute",
    description:
      "Run a shell command (/bin/sh -c) in a sandbox: no network, a read-only system, and this thread's workspace " +
      "(kept between calls) at /workspace as the working directory. Returns { exitCode, signal, stdout, stderr, " +
      "truncated, durationMs, limit? }: a non-zero exitCode is the command's own result; stdout and stderr keep their " +
      "last 64 KiB; limit names the limit that stopped it (timeout, cpu, memory, processes, file-size, output). " +
      "timeoutSeconds (1-600) lowers the 10-minute time limit.",
    input: ExecuteInput
  },
  {
    name: "delegate",
    description:
      "Send a message to another thread, which works on it in its own turn. Returns once the thread accepted it; " +
      "with await: true the call stays open until that turn ends and returns { threadId, status, text } with the " +
      "thread's final text, or an error naming why it failed, was interrupted or timed out (timeoutSeconds, " +
      "default 1800). A thread that is already waiting (directly or through others) cannot be awaited.",
    input: DelegateInput
  },
  {
    name: "trigger_edit",
    description:
      "Create or replace the trigger with this id: spec { cron, timezone?, threadId, text } sends text to the thread " +
      "at each time of the cron expression (five fields: minute hour day-of-month month day-of-week) read in the IANA " +
      "time zone (default UTC). spec null deletes the trigger. Returns the next fire time.",
    input: TriggerEditInput
  }
]

export type ToolEffectKind = `tool.${ToolName}`
/** `tool.mcp_call`: a call of any MCP tool, whose policy is recorded in its payload. */
/** `delegate.reply` / `delegate.withdraw`: an awaited turn's end to its waiting call, and back (Delegation.ts). */
export type EffectKind =
  | "model.step"
  | "thread.cleanup"
  | "trigger.fire"
  | ToolEffectKind
  | "tool.mcp_call"
  | "delegate.reply"
  | "delegate.withdraw"

export const toolKind = <N extends ToolName>(name: N): `tool.${N}` => `tool.${name}`

export interface EffectPolicy {
  readonly kind: EffectKind
  /** The tool the model calls to cause this effect; absent for the domain's own effects. */
  readonly tool?: ToolName
  /** A function decides per row from the payload recorded when the call was planned. */
  readonly onProcessLoss: Reactor.KindPolicy["onProcessLoss"]
  /**
   * Every thread effect runs in its thread's lane, so a turn's steps never overlap; a tick in its
   * trigger's. Except delegation's messages to another thread (`delegate.reply`, `delegate.withdraw`):
   * each has a lane of its own (Delegation.ts), as it must not wait behind this thread's next turn.
   */
  readonly lane: "thread" | "trigger"
  readonly timeout: Duration.Duration
}

/** A kind's policy; `tool` only for the kinds a model's tool call causes, `lane` "thread" unless said. */
const policy = <K extends EffectKind>(
  kind: K,
  onProcessLoss: EffectPolicy["onProcessLoss"],
  timeout: Duration.Duration,
  options: { readonly tool?: ToolName; readonly lane?: EffectPolicy["lane"] } = {}
): EffectPolicy & { readonly kind: K } => ({
  kind,
  ...(options.tool === undefined ? {} : { tool: options.tool }),
  onProcessLoss,
  lane: options.lane ?? "thread",
  timeout
})

/**
 * The one table of kinds: for each, what a lost process means, its timeout, and its lane. Keep these
 * names: effect ids and stored rows depend on them.
 */
export const toolPolicies: { readonly [K in EffectKind]: EffectPolicy & { readonly kind: K } } = {
  // The call is repeated; its response is recorded once, by outcome id.
  "model.step": policy("model.step", "replay-safe", Duration.seconds(120)),
  // Content addressed: a second performance makes no second version.
  "tool.publish": policy("tool.publish", "replay-safe", Duration.seconds(30), { tool: "publish" }),
  // A sandbox run cannot be proven not to have happened, so it is never repeated blindly.
  "tool.execute": policy("tool.execute", "process-bound", Duration.minutes(10), { tool: "execute" }),
  // Replay-safe through receipts: the dispatched command id derives from the effect id.
  "tool.delegate": policy("tool.delegate", "replay-safe", Duration.seconds(30), { tool: "delegate" }),
  // An idempotent put of the whole trigger.
  "tool.trigger_edit": policy("tool.trigger_edit", "replay-safe", Duration.seconds(30), { tool: "trigger_edit" }),
  // From the tool's annotations, recorded with the call: read-only or idempotent tools are replay-safe;
  // any other may have acted in a way we cannot ask the server about, so it is treated like execute.
  "tool.mcp_call": policy("tool.mcp_call", recordedPolicy, Duration.seconds(60)),
  "thread.cleanup": policy("thread.cleanup", "replay-safe", Duration.seconds(60)),
  // A trigger's tick: a message.send under the tick's id, answered as a duplicate when repeated.
  "trigger.fire": policy("trigger.fire", "replay-safe", Duration.seconds(30), { lane: "trigger" }),
  // A command to the waiting thread under an id derived from the effect: its receipt makes a repeat a
  // duplicate. In a lane of its own (see `lane` above), as is a withdraw.
  "delegate.reply": policy("delegate.reply", "replay-safe", Duration.seconds(30)),
  // A command to the awaited thread, idem.
  "delegate.withdraw": policy("delegate.withdraw", "replay-safe", Duration.seconds(30))
}
