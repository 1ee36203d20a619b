import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { effectStatus, postJson, raw, tempDataDir, waitFor } from "./fixtures/server.js"
import { exitOf, serving, startProcess } from "./fixtures/process.js"

describe("the server process", () => {
  it.scopedLive("a bad variable is reported by name and the server does not start", () =>
    Effect.gen(function* () {
      const badPort = yield* startProcess({ DATA_DIR: tempDataDir(), PORT: "eighty" })
      assert.strictEqual((yield* exitOf(badPort)).code, 2)
      assert.include(badPort.stderr.join(""), "PORT must be a whole number")
      const postgres = yield* startProcess({ DATA_DIR: tempDataDir(), DATABASE_URL: "mysql://localhost/db" })
      assert.strictEqual((yield* exitOf(postgres)).code, 2)
      assert.include(postgres.stderr.join(""), "DATABASE_URL must be a postgres://")
    })
  )

  it.scopedLive(
    "authentication never turns off silently: a blank API_TOKEN, an open non-loopback HOST, a HOST that is no address",
    () =>
      Effect.gen(function* () {
        const cases: Array<[Record<string, string>, number, string]> = [
          [{ API_TOKEN: "" }, 2, "API_TOKEN is set but empty"],
          [{ HOST: "0.0.0.0" }, 2, "ALLOW_UNAUTHENTICATED=1"],
          [{ HOST: "999.1.1.1" }, 2, "HOST must be an IP address"]
        ]
        for (const [env, code, message] of cases) {
          const server = yield* startProcess({ DATA_DIR: tempDataDir(), ...env })
          assert.strictEqual((yield* exitOf(server)).code, code, JSON.stringify(env))
          assert.include(server.stderr.join(""), message, JSON.stringify(env))
        }
      })
  )

  it.scopedLive(
    "a HOST that does not resolve stops the server with a message naming why, not a bare 'ServeError:'",
    () =>
      Effect.gen(function* () {
        const server = yield* startProcess({
          DATA_DIR: tempDataDir(),
          HOST: "no-such-host.invalid",
          API_TOKEN: "0123456789"
        })
        assert.strictEqual((yield* exitOf(server)).code, 1)
        assert.include(server.stderr.join(""), "no-such-host.invalid")
      })
  )

  it.scopedLive(
    "a second server on the same data directory refuses to start with a clear message; the first keeps serving",
    () =>
      Effect.gen(function* () {
        const dataDir = tempDataDir()
        const first = yield* startProcess({ DATA_DIR: dataDir })
        const url = yield* serving(first)
        const second = yield* startProcess({ DATA_DIR: dataDir })
        const exit = yield* exitOf(second)
        assert.notStrictEqual(exit.code, 0)
        assert.include(second.stderr.join(""), "StoreLocked")
        assert.include(second.stderr.join(""), "held by another engine process")
        assert.strictEqual((yield* raw(url, "/health")).status, 200)
        first.child.kill("SIGTERM")
        assert.strictEqual((yield* exitOf(first)).code, 0)
      })
  )

  it.scopedLive("SIGTERM while an effect runs: exit 0, and after a restart the work completes, once", () =>
    Effect.gen(function* () {
      const dataDir = tempDataDir()
      // The mail takes 5 s and shutdown grants 200 ms: the replay-safe row is handed back.
      const first = yield* startProcess({ DATA_DIR: dataDir, EMAIL_DELAY_MS: "5000", SHUTDOWN_GRACE_MS: "200" })
      const url = yield* serving(first)
      // Served without a token (loopback), the start-up line says so.
      assert.isTrue(
        first.stdout.some((line) => line.includes('"message":"serving ') && line.includes("authentication OFF")),
        first.stdout.join("\n")
      )
      const opened = yield* postJson(url, "/v1/commands", {
        commandId: "o-1",
        type: "account.open",
        accountId: "acc-1",
        owner: "ada@example.com"
      })
      assert.strictEqual(opened.status, 200)
      yield* waitFor(
        "the mail to be running",
        Effect.map(effectStatus(url, "o-1:welcome"), (r) => (r.status === "running" ? r : undefined))
      )
      first.child.kill("SIGTERM")
      assert.deepStrictEqual(yield* exitOf(first), { code: 0, signal: null })
      assert.isTrue(first.stdout.some((line) => line.includes("shutting down")))

      const second = yield* startProcess({ DATA_DIR: dataDir })
      const url2 = yield* serving(second)
      const done = yield* waitFor(
        "the mail after restart",
        Effect.map(effectStatus(url2, "o-1:welcome"), (r) => (r.status === "succeeded" ? r : undefined))
      )
      assert.strictEqual(done.attempts, 2)
      const mail = readFileSync(join(dataDir, "mail.log"), "utf8").trim().split("\n")
      assert.strictEqual(mail.length, 1)
      // The log continues where it was: the same command is a duplicate, new ones follow it.
      const again = yield* postJson(url2, "/v1/commands", {
        commandId: "o-1",
        type: "account.open",
        accountId: "acc-1",
        owner: "ada@example.com"
      })
      assert.strictEqual(again.body.duplicate, true)
      const next = yield* postJson(url2, "/v1/commands", {
        commandId: "d-1",
        type: "account.deposit",
        accountId: "acc-1",
        amount: 3
      })
      assert.strictEqual(next.body.sequence, 2)
      second.child.kill("SIGINT")
      assert.strictEqual((yield* exitOf(second)).code, 0)
    })
  )
})
