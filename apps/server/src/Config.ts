/**
 * The server's configuration, read once from the environment. Parsing is a pure function so every
 * rule is tested without a process; a bad value names its variable and the server does not start.
 */
import { Approval, Delegation, McpResults, McpTools, Sandbox } from "@orchestration/agents"
import { Either, LogLevel, Redacted, Schema } from "effect"
import { readFileSync } from "node:fs"
import { isIP } from "node:net"
import { hostname } from "node:os"
import { join, resolve } from "node:path"

export class ConfigInvalid extends Schema.TaggedError<ConfigInvalid>()("ConfigInvalid", {
  variable: Schema.String,
  message: Schema.String
}) {}

export interface ServerConfig {
  readonly port: number
  readonly host: string
  /** Absolute: the database file and the domain's world directory live here. */
  readonly dataDir: string
  readonly databaseFile: string
  /** DATABASE_URL: PostgreSQL shared by several server processes; unset: SQLite in `databaseFile`. */
  readonly databaseUrl: Redacted.Redacted<string> | undefined
  /** DATABASE_SCHEMA: the PostgreSQL schema of this deployment (default `public`). */
  readonly databaseSchema: string
  readonly diskFloorBytes: number
  readonly provider: "scripted" | "openai"
  readonly openaiBaseUrl: string
  readonly openaiApiKey: Redacted.Redacted<string> | undefined
  readonly apiToken: Redacted.Redacted<string> | undefined
  /** ALLOW_UNAUTHENTICATED=1: serve a non-loopback HOST without API_TOKEN (the operator's explicit choice). */
  readonly allowUnauthenticated: boolean
  /** ALLOWED_HOSTS: host names a request's Host (and a state-changing request's Origin) may name, besides the bound address and localhost. */
  readonly allowedHosts: ReadonlyArray<string>
  readonly logLevel: LogLevel.LogLevel
  readonly shutdownGraceMs: number
  /** While the store refuses writes, how often a probe write asks whether it takes them again. */
  readonly storageProbeMs: number
  readonly nodeId: string
  /** How `execute` runs commands: SANDBOX (bwrap, or none: unsafe, development only) and the SANDBOX_* limits. */
  readonly sandbox: Sandbox.SandboxConfig
  /** The MCP servers of MCP_CONFIG, else of `<DATA_DIR>/mcp.json` when it exists; none otherwise. */
  readonly mcp: McpTools.McpConfig
  /** MCP_RESULT_BYTES: bytes of an MCP tool's answer kept (default 128 KiB); more is cut, saying so. */
  readonly mcpResultBytes: number
  /** Where the dashboard's built files are (DASHBOARD_DIR); unset: apps/dashboard/dist beside the server. */
  readonly dashboardDir?: string
  /** WORLD_DIR: the agents domain's world directory; unset: `world` in DATA_DIR. */
  readonly worldDir: string
  /** OPENAI_MODEL: the model the OpenAI-compatible provider asks for. */
  readonly openaiModel: string
  /** STORAGE_FAULTS: writes the store refuses on purpose (the chaos harness's I/O-error mode); never by request. */
  readonly storageFaults: string | undefined
  /** FAULT_POINTS: instants where the process kills itself (crash tests, the chaos harness); never by request. */
  readonly faultPoints: string | undefined
  /**
   * Which tool calls wait for an operator: APPROVAL (off, the default, or required), APPROVAL_TIMEOUT
   * (default 24h) and APPROVAL_TOOLS (the tools that wait; default execute and process-bound MCP tools).
   */
  readonly approval: Approval.ApprovalPolicy
  /**
   * DELEGATE_TIMEOUT: how long an awaited `delegate` waits when its call names no `timeoutSeconds`
   * (default 30m, between 1s and 1d, the range `timeoutSeconds` allows).
   */
  readonly delegateTimeoutMs: number
}

export const defaults = {
  port: 8787,
  host: "127.0.0.1",
  dataDir: "./data",
  diskFloorBytes: 64 * 1024 * 1024,
  provider: "scripted",
  openaiBaseUrl: "https://api.openai.com/v1",
  openaiModel: "gpt-4.1-mini",
  logLevel: "info",
  shutdownGraceMs: 10_000,
  storageProbeMs: 5_000
} as const

type Env = Readonly<Record<string, string | undefined>>

const logLevels: Record<string, LogLevel.LogLevel> = {
  all: LogLevel.All,
  trace: LogLevel.Trace,
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warning: LogLevel.Warning,
  warn: LogLevel.Warning,
  error: LogLevel.Error,
  fatal: LogLevel.Fatal,
  none: LogLevel.None
}

class Bad {
  constructor(
    readonly variable: string,
    readonly message: string
  ) {}
}

/** A set, non-blank value, or undefined. Blank counts as unset so `VAR= cmd` behaves as expected. */
const read = (env: Env, name: string) => {
  const value = env[name]?.trim()
  return value === undefined || value === "" ? undefined : value
}

/** A DNS host name: dot-separated labels of letters, digits and hyphens. */
const hostName =
  /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/
const ipv4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/

const isIpv4 = (host: string) => {
  const match = ipv4.exec(host)
  if (match === null) return false
  return match.slice(1).every((octet) => Number(octet) <= 255)
}

const isIpv6 = (host: string) => host.includes(":") && /^[0-9A-Fa-f:.]+$/.test(host) && isIP(host) === 6

/** What HOST may be: an address to listen on or a name to resolve. A name of digits and dots only must be an IPv4 address. */
export const isListenHost = (host: string) =>
  isIpv4(host) || isIpv6(host) || (hostName.test(host) && !/^[\d.]+$/.test(host))

/** Loopback addresses: only this machine can reach a server bound there. */
export const isLoopbackHost = (host: string) =>
  host === "localhost" || host === "::1" || (isIpv4(host) && host.startsWith("127."))

const flag = (env: Env, name: string) => {
  const raw = read(env, name)?.toLowerCase()
  if (raw === undefined || raw === "0" || raw === "false") return false
  if (raw === "1" || raw === "true") return true
  throw new Bad(name, `${name} must be 1 or 0, got '${raw}'`)
}

/** `a.example, b.example:8080, [::1]` → ["a.example", "b.example", "::1"]: names only, a port is ignored. */
const hostList = (env: Env, name: string): ReadonlyArray<string> => {
  const entries = (read(env, name) ?? "")
    .split(",")
    .map((entry) => entry.trim().toLowerCase())
    .filter((entry) => entry !== "")
  return entries.map((entry) => {
    const bracketed = /^\[([0-9a-f:.]+)\](?::\d+)?$/.exec(entry)
    const host = bracketed !== null ? bracketed[1]! : isIpv6(entry) ? entry : entry.replace(/:\d+$/, "")
    if (!isListenHost(host)) throw new Bad(name, `${name} must be a comma-separated list of host names, got '${entry}'`)
    return host
  })
}

const integer = (env: Env, name: string, fallback: number, min: number, max: number) => {
  const raw = read(env, name)
  if (raw === undefined) return fallback
  if (!/^\d+$/.test(raw)) throw new Bad(name, `${name} must be a whole number, got '${raw}'`)
  const value = Number(raw)
  if (!Number.isSafeInteger(value) || value < min || value > max)
    throw new Bad(name, `${name} must be between ${min} and ${max}, got ${raw}`)
  return value
}

/** APPROVAL, APPROVAL_TIMEOUT and APPROVAL_TOOLS: off unless the operator asks for approvals. */
const approvalPolicy = (env: Env): Approval.ApprovalPolicy => {
  const mode = (read(env, "APPROVAL") ?? "off").toLowerCase()
  if (mode !== "off" && mode !== "required")
    throw new Bad("APPROVAL", `APPROVAL must be 'off' or 'required', got '${mode}'`)
  const timeoutText = read(env, "APPROVAL_TIMEOUT")
  const timeoutMs = timeoutText === undefined ? Approval.DEFAULT_TIMEOUT_MS : Approval.parseDuration(timeoutText)
  if (timeoutMs === undefined || timeoutMs < 1_000 || timeoutMs > 30 * 86_400_000)
    throw new Bad(
      "APPROVAL_TIMEOUT",
      `APPROVAL_TIMEOUT must be a duration between 1s and 30d such as 24h, 30m or 90s, got '${timeoutText}'`
    )
  const toolsText = read(env, "APPROVAL_TOOLS")
  const tools = toolsText
    ?.split(",")
    .map((name) => name.trim())
    .filter((name) => name !== "")
  const bad = tools?.find((name) => !/^[A-Za-z0-9_-]{1,64}$/.test(name))
  if (bad !== undefined)
    throw new Bad("APPROVAL_TOOLS", `APPROVAL_TOOLS must be a comma-separated list of tool names, got '${bad}'`)
  if (tools !== undefined && mode === "off")
    throw new Bad("APPROVAL_TOOLS", "APPROVAL_TOOLS is set but APPROVAL is off: set APPROVAL=required")
  return { mode, timeoutMs, ...(tools === undefined ? {} : { tools }) }
}

/** DELEGATE_TIMEOUT: the default deadline of an awaited delegate. */
const delegateTimeout = (env: Env): number => {
  const text = read(env, "DELEGATE_TIMEOUT")
  if (text === undefined) return Delegation.DEFAULT_DELEGATE_TIMEOUT_MS
  const ms = Approval.parseDuration(text)
  if (ms === undefined || ms < 1_000 || ms > 86_400_000)
    throw new Bad(
      "DELEGATE_TIMEOUT",
      `DELEGATE_TIMEOUT must be a duration between 1s and 1d such as 30m or 90s, got '${text.slice(0, 64)}'`
    )
  return ms
}

/**
 * The operator's MCP servers: MCP_CONFIG names the file (which must exist); else `<DATA_DIR>/mcp.json`
 * is read when it exists. A file that is not valid JSON of the expected shape stops the server.
 */
const mcpConfig = (env: Env, cwd: string, dataDir: string): McpTools.McpConfig => {
  const named = read(env, "MCP_CONFIG")
  const file = named === undefined ? join(dataDir, "mcp.json") : resolve(cwd, named)
  let text: string
  try {
    text = readFileSync(file, "utf8")
  } catch (error) {
    const code = (error as { code?: unknown }).code
    // swallow-ok: the default file is optional; without it no MCP server is configured.
    if (named === undefined && code === "ENOENT") return McpTools.noServers
    throw new Bad("MCP_CONFIG", `cannot read the MCP server config ${file}: ${String(code ?? error)}`)
  }
  const parsed = McpTools.parseConfig(text)
  if (Either.isLeft(parsed)) {
    throw new Bad(
      "MCP_CONFIG",
      `the MCP server config ${file} is not { "mcpServers": { "<name>": { "command", "args"?, "env"?, "cwd"? } } }: ${parsed.left.slice(0, 500)}`
    )
  }
  return parsed.right
}

/**
 * Where the server keeps its store and world: DATA_DIR (default ./data) and its `engine.db`, WORLD_DIR
 * (default `<DATA_DIR>/world`), and DATABASE_URL when the store is PostgreSQL instead. The one reading
 * of those variables: parseConfig builds on it, and the CLI's offline `db` commands call it.
 */
export const storePlaces = (env: Env, cwd: string = process.cwd()) => {
  const dataDir = resolve(cwd, read(env, "DATA_DIR") ?? defaults.dataDir)
  const worldDir = read(env, "WORLD_DIR")
  return {
    dataDir,
    databaseFile: join(dataDir, "engine.db"),
    databaseUrl: read(env, "DATABASE_URL"),
    /** WORLD_DIR resolved, or undefined when it is not set. */
    worldDirFromEnv: worldDir === undefined ? undefined : resolve(cwd, worldDir),
    worldDir: resolve(cwd, worldDir ?? join(dataDir, "world"))
  }
}

export const parseConfig = (env: Env, cwd: string = process.cwd()): Either.Either<ServerConfig, ConfigInvalid> => {
  try {
    const places = storePlaces(env, cwd)
    const databaseUrl = places.databaseUrl
    if (databaseUrl !== undefined) {
      let parsed: URL | undefined
      try {
        parsed = new URL(databaseUrl)
      } catch {
        parsed = undefined
      }
      if (parsed === undefined || (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:")) {
        throw new Bad(
          "DATABASE_URL",
          "DATABASE_URL must be a postgres://user@host:port/database URL (unset it to use embedded SQLite in DATA_DIR)"
        )
      }
    }
    const databaseSchema = read(env, "DATABASE_SCHEMA") ?? "public"
    if (!/^[a-z_][a-z0-9_]{0,40}$/.test(databaseSchema)) {
      throw new Bad("DATABASE_SCHEMA", `DATABASE_SCHEMA must be a lower-case SQL identifier, got '${databaseSchema}'`)
    }
    const port = integer(env, "PORT", defaults.port, 0, 65_535)
    const host = read(env, "HOST") ?? defaults.host
    if (!isListenHost(host))
      throw new Bad("HOST", `HOST must be an IP address (127.0.0.1, ::1, 0.0.0.0) or a host name, got '${host}'`)
    const dataDir = places.dataDir
    const diskFloorBytes = integer(env, "DISK_FLOOR_BYTES", defaults.diskFloorBytes, 0, Number.MAX_SAFE_INTEGER)
    const provider = read(env, "PROVIDER") ?? defaults.provider
    if (provider !== "scripted" && provider !== "openai") {
      throw new Bad("PROVIDER", `PROVIDER must be 'scripted' or 'openai', got '${provider}'`)
    }
    const openaiBaseUrl = read(env, "OPENAI_BASE_URL") ?? defaults.openaiBaseUrl
    let url: URL
    try {
      url = new URL(openaiBaseUrl)
    } catch {
      throw new Bad("OPENAI_BASE_URL", `OPENAI_BASE_URL must be an http(s) URL, got '${openaiBaseUrl}'`)
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new Bad("OPENAI_BASE_URL", `OPENAI_BASE_URL must be an http(s) URL, got '${openaiBaseUrl}'`)
    }
    const apiKey = read(env, "OPENAI_API_KEY")
    if (provider === "openai" && apiKey === undefined) {
      throw new Bad("OPENAI_API_KEY", "OPENAI_API_KEY is required when PROVIDER=openai")
    }
    // A token that is set but empty would silently mean "no authentication": refuse it instead.
    if (env.API_TOKEN !== undefined && env.API_TOKEN.trim() === "") {
      throw new Bad(
        "API_TOKEN",
        "API_TOKEN is set but empty: set a token of at least 8 characters, or unset it to serve without authentication"
      )
    }
    const apiToken = read(env, "API_TOKEN")
    if (apiToken !== undefined && apiToken.length < 8)
      throw new Bad("API_TOKEN", "API_TOKEN must be at least 8 characters")
    const allowUnauthenticated = flag(env, "ALLOW_UNAUTHENTICATED")
    if (apiToken === undefined && !allowUnauthenticated && !isLoopbackHost(host)) {
      throw new Bad(
        "HOST",
        `HOST ${host} is reachable from other machines: set API_TOKEN, or ALLOW_UNAUTHENTICATED=1 to serve it without authentication`
      )
    }
    const allowedHosts = hostList(env, "ALLOWED_HOSTS")
    const levelName = (read(env, "LOG_LEVEL") ?? defaults.logLevel).toLowerCase()
    const logLevel = logLevels[levelName]
    if (logLevel === undefined) {
      throw new Bad("LOG_LEVEL", `LOG_LEVEL must be one of ${Object.keys(logLevels).join(", ")}, got '${levelName}'`)
    }
    const shutdownGraceMs = integer(env, "SHUTDOWN_GRACE_MS", defaults.shutdownGraceMs, 0, 10 * 60_000)
    const storageProbeMs = integer(env, "STORAGE_PROBE_MS", defaults.storageProbeMs, 10, 10 * 60_000)
    const nodeId =
      read(env, "NODE_ID") ??
      (hostname()
        .replace(/[^A-Za-z0-9._-]/g, "-")
        .slice(0, 64) ||
        "node")
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(nodeId))
      throw new Bad("NODE_ID", `NODE_ID must be 1-64 characters of [A-Za-z0-9._-], got '${nodeId}'`)
    const dashboardDir = read(env, "DASHBOARD_DIR")
    const sandbox = Sandbox.parseConfig(env)
    if (Either.isLeft(sandbox)) throw new Bad(sandbox.left.variable, sandbox.left.message)
    const mcp = mcpConfig(env, cwd, dataDir)
    const mcpResultBytes = integer(
      env,
      "MCP_RESULT_BYTES",
      McpResults.defaultResultBytes,
      McpResults.minResultBytes,
      64 * 1024 * 1024
    )
    const approval = approvalPolicy(env)
    const delegateTimeoutMs = delegateTimeout(env)
    return Either.right({
      approval,
      delegateTimeoutMs,
      ...(dashboardDir === undefined ? {} : { dashboardDir: resolve(cwd, dashboardDir) }),
      port,
      host,
      dataDir,
      databaseFile: places.databaseFile,
      databaseUrl: databaseUrl === undefined ? undefined : Redacted.make(databaseUrl),
      databaseSchema,
      diskFloorBytes,
      provider,
      openaiBaseUrl,
      openaiApiKey: apiKey === undefined ? undefined : Redacted.make(apiKey),
      openaiModel: read(env, "OPENAI_MODEL") ?? defaults.openaiModel,
      apiToken: apiToken === undefined ? undefined : Redacted.make(apiToken),
      allowUnauthenticated,
      allowedHosts,
      logLevel,
      shutdownGraceMs,
      storageProbeMs,
      nodeId,
      sandbox: sandbox.right,
      mcp,
      mcpResultBytes,
      worldDir: places.worldDir,
      storageFaults: read(env, "STORAGE_FAULTS"),
      faultPoints: read(env, "FAULT_POINTS")
    })
  } catch (error) {
    if (error instanceof Bad)
      return Either.left(new ConfigInvalid({ variable: error.variable, message: error.message }))
    throw error
  }
}
