/**
 * The server's configuration, read once from the environment. Parsing is a pure function so every
 * rule is tested without a process; a bad value names its variable and the server does not start.
 */
import { Sandbox } from "@orchestration/agents"
import { Either, LogLevel, Redacted, Schema } from "effect"
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
  readonly logLevel: LogLevel.LogLevel
  readonly shutdownGraceMs: number
  readonly nodeId: string
  /** How `execute` runs commands: SANDBOX (bwrap, or none: unsafe, development only) and the SANDBOX_* limits. */
  readonly sandbox: Sandbox.SandboxConfig
  /** Where the dashboard's built files are (DASHBOARD_DIR); unset: apps/dashboard/dist beside the server. */
  readonly dashboardDir?: string
}

export const defaults = {
  port: 8787,
  host: "127.0.0.1",
  dataDir: "./data",
  diskFloorBytes: 64 * 1024 * 1024,
  provider: "scripted",
  openaiBaseUrl: "https://api.openai.com/v1",
  logLevel: "info",
  shutdownGraceMs: 10_000
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
  constructor(readonly variable: string, readonly message: string) {}
}

/** A set, non-blank value, or undefined. Blank counts as unset so `VAR= cmd` behaves as expected. */
const read = (env: Env, name: string) => {
  const value = env[name]?.trim()
  return value === undefined || value === "" ? undefined : value
}

const integer = (env: Env, name: string, fallback: number, min: number, max: number) => {
  const raw = read(env, name)
  if (raw === undefined) return fallback
  if (!/^\d+$/.test(raw)) throw new Bad(name, `${name} must be a whole number, got '${raw}'`)
  const value = Number(raw)
  if (!Number.isSafeInteger(value) || value < min || value > max) throw new Bad(name, `${name} must be between ${min} and ${max}, got ${raw}`)
  return value
}

export const parseConfig = (env: Env, cwd: string = process.cwd()): Either.Either<ServerConfig, ConfigInvalid> => {
  try {
    const databaseUrl = read(env, "DATABASE_URL")
    if (databaseUrl !== undefined) {
      let parsed: URL | undefined
      try {
        parsed = new URL(databaseUrl)
      } catch {
        parsed = undefined
      }
      if (parsed === undefined || (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:")) {
        throw new Bad("DATABASE_URL", "DATABASE_URL must be a postgres://user@host:port/database URL (unset it to use embedded SQLite in DATA_DIR)")
      }
    }
    const databaseSchema = read(env, "DATABASE_SCHEMA") ?? "public"
    if (!/^[a-z_][a-z0-9_]{0,40}$/.test(databaseSchema)) {
      throw new Bad("DATABASE_SCHEMA", `DATABASE_SCHEMA must be a lower-case SQL identifier, got '${databaseSchema}'`)
    }
    const port = integer(env, "PORT", defaults.port, 0, 65_535)
    const host = read(env, "HOST") ?? defaults.host
    const dataDir = resolve(cwd, read(env, "DATA_DIR") ?? defaults.dataDir)
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
    const apiToken = read(env, "API_TOKEN")
    if (apiToken !== undefined && apiToken.length < 8) throw new Bad("API_TOKEN", "API_TOKEN must be at least 8 characters")
    const levelName = (read(env, "LOG_LEVEL") ?? defaults.logLevel).toLowerCase()
    const logLevel = logLevels[levelName]
    if (logLevel === undefined) {
      throw new Bad("LOG_LEVEL", `LOG_LEVEL must be one of ${Object.keys(logLevels).join(", ")}, got '${levelName}'`)
    }
    const shutdownGraceMs = integer(env, "SHUTDOWN_GRACE_MS", defaults.shutdownGraceMs, 0, 10 * 60_000)
    const nodeId = read(env, "NODE_ID") ?? (hostname().replace(/[^A-Za-z0-9._-]/g, "-").slice(0, 64) || "node")
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(nodeId)) throw new Bad("NODE_ID", `NODE_ID must be 1-64 characters of [A-Za-z0-9._-], got '${nodeId}'`)
    const dashboardDir = read(env, "DASHBOARD_DIR")
    const sandbox = Sandbox.parseConfig(env)
    if (Either.isLeft(sandbox)) throw new Bad(sandbox.left.variable, sandbox.left.message)
    return Either.right({
      ...(dashboardDir === undefined ? {} : { dashboardDir: resolve(cwd, dashboardDir) }),
      port,
      host,
      dataDir,
      databaseFile: join(dataDir, "engine.db"),
      databaseUrl: databaseUrl === undefined ? undefined : Redacted.make(databaseUrl),
      databaseSchema,
      diskFloorBytes,
      provider,
      openaiBaseUrl,
      openaiApiKey: apiKey === undefined ? undefined : Redacted.make(apiKey),
      apiToken: apiToken === undefined ? undefined : Redacted.make(apiToken),
      logLevel,
      shutdownGraceMs,
      nodeId,
      sandbox: sandbox.right
    })
  } catch (error) {
    if (error instanceof Bad) return Either.left(new ConfigInvalid({ variable: error.variable, message: error.message }))
    throw error
  }
}
