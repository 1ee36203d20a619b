/**
 * Request bodies at the edge, as raw bytes on a socket (the body must be exact): a body that is not
 * what the route takes is refused and changes nothing, and a refused body's rest is read only so far.
 * Found by a review (2026-12-05); each test failed before its fix.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { connect } from "node:net"
import { exact } from "./fixtures/rawHttp.js"
import { effectStatus, postJson, startServer, waitFor } from "./fixtures/server.js"

/** One request as bytes (the body may be any bytes); the answer's status line and body. */
const sendBytes = (url: string, path: string, body: Buffer) =>
  Effect.async<{ status: number; body: any }>((resume) => {
    const target = new URL(url)
    const head =
      `POST ${path} HTTP/1.1\r\nhost: ${target.host}\r\ncontent-type: application/json\r\n` +
      `content-length: ${body.length}\r\nconnection: close\r\n\r\n`
    const got: Array<Buffer> = []
    const socket = connect(Number(target.port), target.hostname, () =>
      socket.write(Buffer.concat([Buffer.from(head), body]))
    )
    socket.on("data", (chunk: Buffer) => got.push(chunk))
    socket.on("close", () => {
      const text = Buffer.concat(got).toString("utf8")
      const split = text.indexOf("\r\n\r\n")
      let parsed: unknown = text.slice(split + 4)
      try {
        parsed = JSON.parse(parsed as string)
      } catch {
        // swallow-ok: not JSON, the text is the body
      }
      resume(Effect.succeed({ status: Number(text.split(" ")[1]), body: parsed }))
    })
    setTimeout(() => socket.destroy(), 5_000)
  })

describe("a command body that is not UTF-8", () => {
  it.scopedLive(
    "is a 400 InvalidCommand and nothing is stored (it was accepted with U+FFFD in place of the bytes)",
    () =>
      Effect.gen(function* () {
        const { url } = yield* startServer()
        // {"commandId":"utf8-1","type":"account.open","accountId":"utf8-1","owner":"a<FF FE>"}
        const body = Buffer.concat([
          Buffer.from('{"commandId":"utf8-1","type":"account.open","accountId":"utf8-1","owner":"a'),
          Buffer.from([0xff, 0xfe]),
          Buffer.from('"}')
        ])
        const answer = yield* sendBytes(url, "/v1/commands", body)
        const stored = yield* exact(url, { path: "/v1/events?aggregateId=utf8-1" })
        assert.strictEqual(answer.status, 400, `answered ${answer.status}; stored: ${stored.text.slice(0, 300)}`)
        assert.strictEqual(answer.body?.error, "InvalidCommand")
        assert.strictEqual((yield* exact(url, { path: "/v1/commands/utf8-1" })).status, 404)
        assert.deepStrictEqual(stored.body.events, [])
      })
  )
})

/** A POST with a chunked body of no bytes at all. */
const sendEmptyChunked = (url: string, path: string) =>
  Effect.async<{ status: number; text: string }>((resume) => {
    const target = new URL(url)
    const got: Array<Buffer> = []
    const socket = connect(Number(target.port), target.hostname, () =>
      socket.write(
        `POST ${path} HTTP/1.1\r\nhost: ${target.host}\r\ncontent-type: application/json\r\n` +
          "transfer-encoding: chunked\r\nconnection: close\r\n\r\n0\r\n\r\n"
      )
    )
    socket.on("data", (chunk: Buffer) => got.push(chunk))
    socket.on("close", () => {
      const text = Buffer.concat(got).toString("utf8")
      resume(Effect.succeed({ status: Number(text.split(" ")[1]), text: text.slice(text.indexOf("\r\n\r\n") + 4) }))
    })
    setTimeout(() => socket.destroy(), 5_000)
  })

describe("an operator action whose body is JSON null", () => {
  it.scopedLive("is a 400 InvalidRequest like [] or 0, and the effect is not cancelled (null read as no body)", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      // later@… is due in an hour: pending, cancellable.
      yield* postJson(url, "/v1/commands", {
        commandId: "n-1",
        type: "account.open",
        accountId: "acc-n",
        owner: "later@example.com"
      })
      yield* waitFor(
        "the pending welcome",
        Effect.map(effectStatus(url, "n-1:welcome"), (r) => (r.status === "pending" ? r : undefined))
      )
      const array = yield* sendBytes(url, "/v1/effects/n-1%3Awelcome/cancel", Buffer.from("[]"))
      assert.strictEqual(array.status, 400)
      const answer = yield* sendBytes(url, "/v1/effects/n-1%3Awelcome/cancel", Buffer.from("null"))
      const after = yield* effectStatus(url, "n-1:welcome")
      assert.strictEqual(answer.status, 400, `null body answered ${answer.status}; the effect is now ${after.status}`)
      assert.strictEqual(after.status, "pending")
    })
  )
})

/**
 * Sends a head (declared length or chunked) and then up to `totalMiB` MiB of body in 64 KiB pieces,
 * as fast as the socket takes them; how many MiB the server took before it cut the connection (or all).
 */
const upload = (url: string, framing: "declared" | "chunked", totalMiB: number) =>
  Effect.async<{ sentMiB: number; cut: boolean; answer: string }>((resume) => {
    const target = new URL(url)
    const total = totalMiB * 1024 * 1024
    const head =
      `POST /v1/commands HTTP/1.1\r\nhost: ${target.host}\r\ncontent-type: application/json\r\n` +
      (framing === "declared" ? `content-length: ${total}\r\n\r\n` : "transfer-encoding: chunked\r\n\r\n")
    const piece = Buffer.alloc(65536, "x")
    const framed =
      framing === "declared" ? piece : Buffer.concat([Buffer.from("10000\r\n"), piece, Buffer.from("\r\n")])
    let sent = 0
    let cut = false
    let answer = ""
    let done = false
    const finish = () => {
      if (done) return
      done = true
      socket.destroy()
      resume(Effect.succeed({ sentMiB: Math.round(sent / 1024 / 1024), cut, answer: answer.split("\r\n")[0]! }))
    }
    const socket = connect(Number(target.port), target.hostname, () => {
      socket.write(head)
      const pump = () => {
        while (sent < total && !socket.destroyed) {
          sent += piece.length
          if (!socket.write(framed)) return void socket.once("drain", pump)
        }
        // All of it was taken: wait a moment for a late cut, then report.
        setTimeout(finish, 500)
      }
      pump()
    })
    socket.on("data", (chunk: Buffer) => (answer += chunk.toString("utf8")))
    socket.on("error", () => {
      cut = true
      finish()
    })
    socket.on("close", () => {
      cut = cut || sent < total
      finish()
    })
    setTimeout(finish, 30_000)
  })

describe("a refused body's discarded rest is bounded", () => {
  it.scopedLive("a declared 64 MiB body is answered 413 and cut after 1 + 8 MiB, as a chunked one is", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      const chunked = yield* upload(url, "chunked", 64)
      const declared = yield* upload(url, "declared", 64)
      const seen = `chunked: ${JSON.stringify(chunked)}; declared: ${JSON.stringify(declared)}`
      assert.match(chunked.answer, / 413 /, seen)
      assert.isTrue(chunked.cut, seen)
      assert.match(declared.answer, / 413 /, seen)
      assert.isTrue(declared.cut, `the server read the whole declared body: ${seen}`)
    })
  )
})

describe("an operator action's optional body, sent chunked and empty", () => {
  it.scopedLive("is no body, as one never sent (it was 400: not valid JSON)", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      yield* postJson(url, "/v1/commands", {
        commandId: "e-1",
        type: "account.open",
        accountId: "acc-e",
        owner: "later@example.com"
      })
      yield* waitFor(
        "the pending welcome",
        Effect.map(effectStatus(url, "e-1:welcome"), (r) => (r.status === "pending" ? r : undefined))
      )
      const answer = yield* sendEmptyChunked(url, "/v1/effects/e-1%3Awelcome/cancel")
      assert.strictEqual(answer.status, 200, answer.text.slice(0, 300))
      assert.strictEqual((yield* effectStatus(url, "e-1:welcome")).status, "cancelled")
    })
  )
})

describe("a JSON body in another charset", () => {
  it.scopedLive("is 415 (it was read as UTF-8 whatever it said); utf-8 named in any spelling is JSON", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      const command = { commandId: "cs-1", type: "account.open", accountId: "cs-1", owner: "ada" }
      for (const charset of ["utf-16", "iso-8859-1", "UTF-16LE"]) {
        const answer = yield* postJson(url, "/v1/commands", command, {
          "content-type": `application/json; charset=${charset}`
        })
        assert.strictEqual(answer.status, 415, charset)
        assert.strictEqual(answer.body.error, "UnsupportedMediaType", charset)
      }
      assert.strictEqual((yield* exact(url, { path: "/v1/commands/cs-1" })).status, 404)
      for (const [i, charset] of ["utf-8", "UTF-8", '"utf-8"', "utf8"].entries()) {
        const answer = yield* postJson(
          url,
          "/v1/commands",
          { ...command, commandId: `cs-ok-${i}`, accountId: `cs-${i}` },
          {
            "content-type": `application/json; charset=${charset}`
          }
        )
        assert.strictEqual(answer.status, 200, `${charset}: ${JSON.stringify(answer.body)}`)
      }
    })
  )
})
