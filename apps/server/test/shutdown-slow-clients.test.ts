/**
 * README: "SIGTERM/SIGINT: … event streams end, … the store and the listener close; exit 0". A client
 * that stopped reading its event stream (a stalled proxy, a suspended laptop), or that stopped in the
 * middle of its request's body, must not keep the process alive. Found by a review (2026-12-05): both
 * hung past 15 s before the listener cut the connections left after its grace.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { connect } from "node:net"
import { exitOf, serving, startProcess } from "./fixtures/process.js"
import { postJson, tempDataDir } from "./fixtures/server.js"

describe("SIGTERM with an event stream whose client stopped reading", () => {
  it.scopedLive("ends the stream and exits 0 (it waited for the client forever)", () =>
    Effect.gen(function* () {
      const server = yield* startProcess({ DATA_DIR: tempDataDir(), SHUTDOWN_GRACE_MS: "500" })
      const url = yield* serving(server)
      const target = new URL(url)
      // The client reads the head, then never again: the server's writes back up.
      const socket = connect(Number(target.port), target.hostname)
      socket.on("data", () => socket.pause())
      yield* Effect.addFinalizer(() => Effect.sync(() => socket.destroy()))
      socket.write(`GET /v1/events/stream HTTP/1.1\r\nhost: ${target.host}\r\n\r\n`)
      yield* Effect.sleep("300 millis")
      // 20 MB of events (40 accounts with a 500 KB owner) fill both sides' socket buffers.
      const owner = "o".repeat(500_000)
      for (let i = 0; i < 40; i++) {
        const answer = yield* postJson(url, "/v1/commands", {
          commandId: `big-${i}`,
          type: "account.open",
          accountId: `big-${i}`,
          owner: `later${i}@${owner}`
        })
        assert.strictEqual(answer.status, 200)
      }
      yield* Effect.sleep("1 second")
      server.child.kill("SIGTERM")
      // exitOf fails the test with "process did not exit within 15000 ms" (and kills it) when it hangs.
      const exit = yield* exitOf(server, 15_000)
      assert.strictEqual(exit.code, 0)
    })
  )

  it.scopedLive("SIGTERM while a client is mid-body also exits 0 (it waited for the body)", () =>
    Effect.gen(function* () {
      const server = yield* startProcess({ DATA_DIR: tempDataDir(), SHUTDOWN_GRACE_MS: "500" })
      const url = yield* serving(server)
      const target = new URL(url)
      const socket = connect(Number(target.port), target.hostname)
      yield* Effect.addFinalizer(() => Effect.sync(() => socket.destroy()))
      socket.write(
        `POST /v1/commands HTTP/1.1\r\nhost: ${target.host}\r\ncontent-type: application/json\r\n` +
          `content-length: 100\r\n\r\n{"comm`
      )
      yield* Effect.sleep("300 millis")
      server.child.kill("SIGTERM")
      const exit = yield* exitOf(server, 15_000)
      assert.strictEqual(exit.code, 0)
    })
  )
})
