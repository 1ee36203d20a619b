import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { connect, createServer, type AddressInfo } from "node:net"
import { effectStatus, postJson, tempDataDir, waitFor } from "./fixtures/server.js"
import { exitOf, serving, startProcess } from "./fixtures/process.js"

/** A port nobody listens on now, so the test knows where the server will listen before it says so. */
const freePort = Effect.promise(
  () =>
    new Promise<number>((resolve, reject) => {
      const probe = createServer()
      probe.on("error", reject)
      probe.listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as AddressInfo
        probe.close(() => resolve(port))
      })
    })
)

/** Whether the port accepts a TCP connection right now. */
const accepts = (port: number) =>
  Effect.promise(
    () =>
      new Promise<true | undefined>((resolve) => {
        const socket = connect(port, "127.0.0.1")
        socket.once("connect", () => {
          socket.destroy()
          resolve(true)
        })
        socket.once("error", () => resolve(undefined))
      })
  )

interface Answer {
  readonly status: number
  readonly retryAfter: string | null
  readonly body: any
}

/** A request with its own timeout: a connection accepted and never answered fails the test instead of waiting. */
const answered = (url: string, path: string, init: RequestInit = {}) =>
  Effect.promise(async (): Promise<Answer | "no answer within 5 s"> => {
    try {
      const response = await fetch(`${url}${path}`, { ...init, signal: AbortSignal.timeout(5_000) })
      return { status: response.status, retryAfter: response.headers.get("retry-after"), body: await response.json() }
    } catch {
      return "no answer within 5 s"
    }
  })

describe("start-up and shutdown", () => {
  it.scopedLive(
    "a request while boot reconciles is answered at once: 503 Starting with Retry-After, /health starting",
    () =>
      Effect.gen(function* () {
        const dataDir = tempDataDir()
        // A mail left running by a killed process: the next boot has a row to reconcile.
        const first = yield* startProcess({ DATA_DIR: dataDir, EMAIL_DELAY_MS: "60000" })
        const firstUrl = yield* serving(first)
        const open = { commandId: "o-1", type: "account.open", accountId: "acc-1", owner: "ada@example.com" }
        assert.strictEqual((yield* postJson(firstUrl, "/v1/commands", open)).status, 200)
        yield* waitFor(
          "the mail to be running",
          Effect.map(effectStatus(firstUrl, "o-1:welcome"), (r) => (r.status === "running" ? r : undefined))
        )
        first.child.kill("SIGKILL")
        yield* exitOf(first)

        // The restart holds in the middle of reconcile for a minute: the listener is open, the server is not ready.
        const port = yield* freePort
        const second = yield* startProcess({
          DATA_DIR: dataDir,
          PORT: String(port),
          FAULT_POINTS: "reconcile.mid:delay=60000"
        })
        yield* waitFor("the listener", accepts(port), 20_000)
        const url = `http://127.0.0.1:${port}`

        const health = yield* answered(url, "/health")
        assert.deepStrictEqual(health, { status: 503, retryAfter: "1", body: { status: "starting" } })
        const command = yield* answered(url, "/v1/commands", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(open)
        })
        assert.notStrictEqual(command, "no answer within 5 s")
        const refused = command as Answer
        assert.deepStrictEqual([refused.status, refused.retryAfter, refused.body.error], [503, "1", "Starting"])
        assert.isString(refused.body.message)
        const read = yield* answered(url, "/v1/commands/o-1")
        assert.deepStrictEqual(read === "no answer within 5 s" ? read : [read.status, read.body.error], [
          503,
          "Starting"
        ])
        // Still starting: the start-up line comes only once the server is ready.
        assert.isFalse(second.stdout.some((line) => line.includes('"message":"serving ')))
      })
  )

  it.scopedLive(
    "a request while shutdown waits for a running effect is answered at once: 503 shutting-down, /health stopping",
    () =>
      Effect.gen(function* () {
        // The mail runs a minute and shutdown grants it a minute: the process stays in its drain.
        const server = yield* startProcess({
          DATA_DIR: tempDataDir(),
          EMAIL_DELAY_MS: "60000",
          SHUTDOWN_GRACE_MS: "60000"
        })
        const url = yield* serving(server)
        const open = { commandId: "o-1", type: "account.open", accountId: "acc-1", owner: "ada@example.com" }
        assert.strictEqual((yield* postJson(url, "/v1/commands", open)).status, 200)
        yield* waitFor(
          "the mail to be running",
          Effect.map(effectStatus(url, "o-1:welcome"), (r) => (r.status === "running" ? r : undefined))
        )
        server.child.kill("SIGTERM")
        // Every request during the drain is answered (a hang fails each poll after 5 s).
        const health = yield* waitFor(
          "/health stopping",
          Effect.map(answered(url, "/health"), (a) =>
            a !== "no answer within 5 s" && a.body.status === "stopping" ? a : undefined
          ),
          20_000
        )
        assert.deepStrictEqual([health.status, health.retryAfter], [503, "1"])
        const refused = yield* answered(url, "/v1/commands", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ ...open, commandId: "o-2" })
        })
        assert.notStrictEqual(refused, "no answer within 5 s")
        const body = (refused as Answer).body
        assert.deepStrictEqual(
          [(refused as Answer).status, body.error, body.reason],
          [503, "EngineUnavailable", "shutting-down"]
        )
      })
  )
})
