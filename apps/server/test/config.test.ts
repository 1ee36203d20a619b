import { assert, describe, it } from "@effect/vitest"
import { Either, LogLevel, Redacted } from "effect"
import { Sandbox } from "@orchestration/agents"
import { defaults, parseConfig, storePlaces } from "../src/Config.js"

const fails = (env: Record<string, string>) => {
  const parsed = parseConfig(env, "/srv")
  assert.isTrue(Either.isLeft(parsed), JSON.stringify(env))
  return Either.getLeft(parsed).pipe((o) => (o._tag === "Some" ? o.value : assert.fail("expected a failure")))
}

describe("configuration from the environment", () => {
  it("defaults: port 8787 on 127.0.0.1, ./data resolved, SQLite inside it, 64 MiB floor, scripted provider", () => {
    const config = Either.getOrThrow(parseConfig({ NODE_ID: "n1" }, "/srv"))
    assert.strictEqual(config.port, 8787)
    assert.strictEqual(config.host, "127.0.0.1")
    assert.strictEqual(config.dataDir, "/srv/data")
    assert.strictEqual(config.databaseFile, "/srv/data/engine.db")
    assert.strictEqual(config.diskFloorBytes, 64 * 1024 * 1024)
    assert.strictEqual(config.provider, "scripted")
    assert.strictEqual(config.openaiBaseUrl, defaults.openaiBaseUrl)
    assert.strictEqual(config.apiToken, undefined)
    assert.strictEqual(config.logLevel, LogLevel.Info)
    assert.strictEqual(config.shutdownGraceMs, 10_000)
    assert.strictEqual(config.nodeId, "n1")
    assert.deepStrictEqual(config.sandbox, Sandbox.defaultConfig)
  })

  it("the world directory, the model and the fault specs are read here too, with their defaults", () => {
    const unset = Either.getOrThrow(parseConfig({ DATA_DIR: "state" }, "/srv"))
    assert.deepStrictEqual(
      [unset.worldDir, unset.openaiModel, unset.storageFaults, unset.faultPoints],
      ["/srv/state/world", defaults.openaiModel, undefined, undefined]
    )
    const set = Either.getOrThrow(
      parseConfig(
        {
          WORLD_DIR: "elsewhere",
          OPENAI_MODEL: "m-1",
          STORAGE_FAULTS: "events:nth=3:code=SQLITE_IOERR_WRITE",
          FAULT_POINTS: "reconcile.mid:nth=1"
        },
        "/srv"
      )
    )
    assert.deepStrictEqual(
      [set.worldDir, set.openaiModel, set.storageFaults, set.faultPoints],
      ["/srv/elsewhere", "m-1", "events:nth=3:code=SQLITE_IOERR_WRITE", "reconcile.mid:nth=1"]
    )
  })

  it("the store's places (what the CLI's offline db commands read) are the ones the server uses", () => {
    const unset = storePlaces({}, "/srv")
    assert.deepStrictEqual(unset, {
      dataDir: "/srv/data",
      databaseFile: "/srv/data/engine.db",
      databaseUrl: undefined,
      worldDirFromEnv: undefined,
      worldDir: "/srv/data/world"
    })
    const env = { DATA_DIR: "state", WORLD_DIR: " w ", DATABASE_URL: "postgres://db/x", NODE_ID: "n1" }
    const set = storePlaces(env, "/srv")
    assert.deepStrictEqual(
      [set.dataDir, set.databaseFile, set.databaseUrl, set.worldDirFromEnv, set.worldDir],
      ["/srv/state", "/srv/state/engine.db", "postgres://db/x", "/srv/w", "/srv/w"]
    )
    const config = Either.getOrThrow(parseConfig(env, "/srv"))
    assert.deepStrictEqual(
      [config.dataDir, config.databaseFile, config.worldDir],
      [set.dataDir, set.databaseFile, set.worldDir]
    )
  })

  it("the sandbox's mode and limits are read here, once; a bad one names its variable", () => {
    const config = Either.getOrThrow(
      parseConfig({ SANDBOX: "none", SANDBOX_CPU_SECONDS: "60", SANDBOX_MEMORY_BYTES: "536870912" }, "/srv")
    )
    assert.deepStrictEqual(
      [config.sandbox.mode, config.sandbox.cpuSeconds, config.sandbox.memoryBytes],
      ["none", 60, 536_870_912]
    )
    assert.strictEqual(fails({ SANDBOX_MAX_PROCESSES: "many" }).variable, "SANDBOX_MAX_PROCESSES")
    assert.strictEqual(fails({ SANDBOX: "off" }).variable, "SANDBOX")
  })

  it("reads every variable; blank counts as unset", () => {
    const config = Either.getOrThrow(
      parseConfig({
        PORT: "9000",
        HOST: "0.0.0.0",
        DATA_DIR: "/var/lib/orch",
        DISK_FLOOR_BYTES: "1024",
        PROVIDER: "openai",
        OPENAI_BASE_URL: "http://127.0.0.1:4010/v1",
        OPENAI_API_KEY: "sk-test",
        API_TOKEN: "0123456789",
        LOG_LEVEL: "DEBUG",
        SHUTDOWN_GRACE_MS: "500",
        NODE_ID: "node-7",
        DATABASE_URL: " ",
        ALLOWED_HOSTS: " orch.example.com, 10.0.0.5 ",
        MCP_RESULT_BYTES: "65536"
      })
    )
    assert.strictEqual(config.port, 9000)
    assert.strictEqual(config.host, "0.0.0.0")
    assert.strictEqual(config.databaseFile, "/var/lib/orch/engine.db")
    assert.strictEqual(config.diskFloorBytes, 1024)
    assert.strictEqual(config.provider, "openai")
    assert.strictEqual(Redacted.value(config.openaiApiKey!), "sk-test")
    assert.strictEqual(Redacted.value(config.apiToken!), "0123456789")
    assert.strictEqual(config.logLevel, LogLevel.Debug)
    assert.strictEqual(config.shutdownGraceMs, 500)
    assert.deepStrictEqual(config.allowedHosts, ["orch.example.com", "10.0.0.5"])
    assert.strictEqual(config.allowUnauthenticated, false)
    assert.strictEqual(config.mcpResultBytes, 65536)
  })

  it("a bad value names its variable", () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ PORT: "80a" }, "PORT"],
      [{ PORT: "70000" }, "PORT"],
      [{ DISK_FLOOR_BYTES: "-1" }, "DISK_FLOOR_BYTES"],
      [{ PROVIDER: "claude" }, "PROVIDER"],
      [{ OPENAI_BASE_URL: "ftp://x" }, "OPENAI_BASE_URL"],
      [{ PROVIDER: "openai" }, "OPENAI_API_KEY"],
      [{ API_TOKEN: "short" }, "API_TOKEN"],
      [{ LOG_LEVEL: "loud" }, "LOG_LEVEL"],
      [{ SHUTDOWN_GRACE_MS: "soon" }, "SHUTDOWN_GRACE_MS"],
      [{ NODE_ID: "a b" }, "NODE_ID"],
      [{ MCP_RESULT_BYTES: "100" }, "MCP_RESULT_BYTES"]
    ]
    for (const [env, variable] of cases) {
      const error = fails(env)
      assert.strictEqual(error.variable, variable)
      assert.include(error.message, variable)
    }
  })

  it("DATABASE_URL selects PostgreSQL; anything but a postgres:// URL, or a bad schema, is refused by name", () => {
    const error = fails({ DATABASE_URL: "mysql://db/orch" })
    assert.strictEqual(error.variable, "DATABASE_URL")
    assert.include(error.message, "postgres://")
    assert.strictEqual(fails({ DATABASE_URL: "not a url" }).variable, "DATABASE_URL")
    assert.strictEqual(
      fails({ DATABASE_URL: "postgres://db/orch", DATABASE_SCHEMA: "Robert'); DROP" }).variable,
      "DATABASE_SCHEMA"
    )
    const config = Either.getOrThrow(
      parseConfig({ DATABASE_URL: "postgres://app@db:5432/orch", DATABASE_SCHEMA: "tenant_1" }, "/srv")
    )
    assert.strictEqual(Redacted.value(config.databaseUrl!), "postgres://app@db:5432/orch")
    assert.strictEqual(config.databaseSchema, "tenant_1")
    assert.strictEqual(Either.getOrThrow(parseConfig({}, "/srv")).databaseUrl, undefined)
  })

  it("a set but empty or blank API_TOKEN is a configuration error, not 'no authentication'", () => {
    for (const token of ["", "   ", "\t"]) {
      const error = fails({ API_TOKEN: token })
      assert.strictEqual(error.variable, "API_TOKEN")
      assert.include(error.message, "empty")
    }
  })

  it("a non-loopback HOST needs API_TOKEN unless ALLOW_UNAUTHENTICATED=1; loopback hosts do not", () => {
    for (const host of ["0.0.0.0", "::", "10.0.0.5", "orch.example.com"]) {
      const error = fails({ HOST: host })
      assert.strictEqual(error.variable, "HOST")
      assert.include(error.message, "API_TOKEN")
      assert.include(error.message, "ALLOW_UNAUTHENTICATED")
      assert.isTrue(Either.isRight(parseConfig({ HOST: host, API_TOKEN: "0123456789" }, "/srv")))
      const open = Either.getOrThrow(parseConfig({ HOST: host, ALLOW_UNAUTHENTICATED: "1" }, "/srv"))
      assert.strictEqual(open.allowUnauthenticated, true)
    }
    for (const host of ["127.0.0.1", "127.1.2.3", "::1", "localhost"]) {
      assert.isTrue(Either.isRight(parseConfig({ HOST: host }, "/srv")), host)
    }
    assert.strictEqual(fails({ ALLOW_UNAUTHENTICATED: "yes please" }).variable, "ALLOW_UNAUTHENTICATED")
  })

  it("a HOST that is no address or host name is refused by name (999.1.1.1, spaces, a URL)", () => {
    for (const host of ["999.1.1.1", "1.2.3", "a b", "http://x", "[::1]"]) {
      const error = fails({ HOST: host, API_TOKEN: "0123456789" })
      assert.strictEqual(error.variable, "HOST")
      assert.include(error.message, "HOST must be")
    }
  })

  it("ALLOWED_HOSTS is a comma-separated list of host names; anything else is refused by name", () => {
    assert.deepStrictEqual(Either.getOrThrow(parseConfig({}, "/srv")).allowedHosts, [])
    assert.deepStrictEqual(
      Either.getOrThrow(parseConfig({ ALLOWED_HOSTS: "A.example,,b.example:80,::1,[fe80::1]:8080" }, "/srv"))
        .allowedHosts,
      ["a.example", "b.example", "::1", "fe80::1"]
    )
    assert.strictEqual(fails({ ALLOWED_HOSTS: "x y" }).variable, "ALLOWED_HOSTS")
  })
})
