/**
 * How an operator's MCP servers and their tools appear to the model and to the engine, as plain
 * data and pure functions: the config file's shape, the name `<server>__<tool>` a tool is offered
 * under, and the policy after process loss its annotations give a call. The policy is recorded in
 * the call's payload when the call is planned, so a server that later changes its annotations
 * cannot change what happens to a call already recorded.
 */
import { Either, ParseResult, Schema } from "effect"
import { Reactor } from "@orchestration/engine"

/** Letters, digits and `-`: no `_`, so `<server>__<tool>` splits at its first `__` without doubt. */
export const ServerName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9-]{1,32}$/, { description: "1-32 of A-Z a-z 0-9 -" })
)

/** One server as MCP clients declare it: a command started over stdio. */
export const McpServerConfig = Schema.Struct({
  command: Schema.NonEmptyString,
  args: Schema.optional(Schema.Array(Schema.String)),
  env: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  cwd: Schema.optional(Schema.NonEmptyString)
})
export type McpServerConfig = typeof McpServerConfig.Type

/** `{ "mcpServers": { "<name>": { "command", "args"?, "env"?, "cwd"? } } }`, the shape MCP clients use. */
export const McpConfig = Schema.Struct({
  mcpServers: Schema.Record({ key: ServerName, value: McpServerConfig })
})
export type McpConfig = typeof McpConfig.Type

export const noServers: McpConfig = { mcpServers: {} }

/** Decodes the text of a config file, or says what is wrong with it (path of the bad field included). */
export const parseConfig = (text: string): Either.Either<McpConfig, string> =>
  // A name outside ServerName must be refused, not dropped as an excess key.
  Schema.decodeUnknownEither(Schema.parseJson(McpConfig), { onExcessProperty: "error" })(text).pipe(
    Either.mapLeft((error) =>
      ParseResult.ArrayFormatter.formatErrorSync(error)
        .map((issue) => `${issue.path.length === 0 ? "" : `${issue.path.join(".")}: `}${issue.message}`)
        .join("; ")
    )
  )

const separator = "__"

/** OpenAI's rule for tool names; a tool whose combined name breaks it is not offered. */
const offerableName = /^[A-Za-z0-9_-]{1,64}$/

/** The name the model calls, or undefined when the tool's name cannot be offered. */
export const offeredName = (server: string, tool: string): string | undefined => {
  const name = `${server}${separator}${tool}`
  return offerableName.test(name) ? name : undefined
}

/** `<server>__<tool>` → its parts; undefined for any other name (the built-in tools have no `__`). */
export const parseOfferedName = (name: string): { readonly server: string; readonly tool: string } | undefined => {
  const at = name.indexOf(separator)
  if (at <= 0) return undefined
  const server = name.slice(0, at)
  const tool = name.slice(at + separator.length)
  return Schema.is(ServerName)(server) && tool.length > 0 ? { server, tool } : undefined
}

/** The hints of MCP's ToolAnnotations that decide a policy. */
export interface ToolHints {
  readonly readOnlyHint?: boolean | undefined
  readonly idempotentHint?: boolean | undefined
}

/**
 * A tool that says it changes nothing, or that repeating it changes nothing more, may run again
 * after a crash; any other tool may have acted in a way we cannot ask about, so it never runs twice.
 */
export const policyOf = (hints: ToolHints | undefined): Reactor.ProcessLossPolicy =>
  hints?.readOnlyHint === true || hints?.idempotentHint === true ? "replay-safe" : "process-bound"

/** What a planned MCP call records in its effect's payload (ToolCallPlanning.McpCallPayload). */
export const McpTarget = Schema.Struct({
  server: Schema.String,
  tool: Schema.String,
  onProcessLoss: Reactor.ProcessLossPolicy
})
export type McpTarget = typeof McpTarget.Type

/** The policy recorded with a row; a row without one (or with anything else) is process-bound. */
export const recordedPolicy = (payload: unknown): Reactor.ProcessLossPolicy =>
  typeof payload === "object" &&
  payload !== null &&
  "mcp" in payload &&
  typeof payload.mcp === "object" &&
  payload.mcp !== null &&
  "onProcessLoss" in payload.mcp &&
  payload.mcp.onProcessLoss === "replay-safe"
    ? "replay-safe"
    : "process-bound"
