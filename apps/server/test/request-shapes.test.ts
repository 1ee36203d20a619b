import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { connect } from "node:net"
import { domain as accounts } from "./fixtures/AccountsDomain.js"
import { parseDecimal } from "../src/http/QueryParams.js"
import { parseLastEventId } from "../src/http/Sse.js"
import * as ServerDomain from "../src/ServerDomain.js"
import { ThreadViews } from "../src/ThreadViews.js"
import { exact } from "./fixtures/rawHttp.js"
import { startServer } from "./fixtures/server.js"

/** Writes bytes to the server as they are and reads the whole answer (the connection closes after it). */
const sendBytes = (url: string, bytes: string) =>
  Effect.async<string, Error>((resume) => {
    const target = new URL(url)
    const socket = connect(Number(target.port), target.hostname, () => socket.write(bytes))
    const chunks: Array<Buffer> = []
    socket.on("data", (chunk: Buffer) => chunks.push(chunk))
    socket.on("close", () => resume(Effect.succeed(Buffer.concat(chunks).toString("utf8"))))
    socket.on("error", (error) => resume(Effect.fail(error)))
  })

describe("numbers in a request are plain decimal integers, read by one parser", () => {
  it("parseDecimal takes digits only; Last-Event-ID uses it", () => {
    for (const [text, value] of [
      ["0", 0],
      ["5", 5],
      ["1000", 1000],
      ["9007199254740991", 9007199254740991]
    ] as const) {
      assert.strictEqual(parseDecimal(text), value, text)
    }
    for (const text of [
      "",
      " 5",
      "5 ",
      "0x10",
      "1e3",
      "1.5",
      "-1",
      "+1",
      "1_000",
      "９",
      "9007199254740992",
      "Infinity"
    ]) {
      assert.strictEqual(parseDecimal(text), undefined, JSON.stringify(text))
    }
    assert.strictEqual(parseLastEventId("42"), 42)
    assert.isObject(parseLastEventId("1e2"))
    assert.isObject(parseLastEventId("0x10"))
  })

  it.scopedLive(
    "after= and limit= refuse hex, exponents and spaces with a message naming the parameter and what it may be",
    () =>
      Effect.gen(function* () {
        const { url } = yield* startServer()
        for (const query of [
          "after=0x10",
          "after=1e3",
          "after=%205",
          "after=-1",
          "after=1.0",
          "limit=1e2",
          "limit=0",
          "limit=1001"
        ]) {
          const answer = yield* exact(url, { path: `/v1/events?${query}` })
          assert.strictEqual(answer.status, 400, query)
          assert.strictEqual(answer.body.error, "InvalidRequest")
          const name = query.split("=")[0]!
          assert.match(answer.body.message, new RegExp(`^parameter '${name}' must be a whole number`), query)
          assert.notInclude(answer.body.message, "readonly", query)
        }
        assert.strictEqual((yield* exact(url, { path: "/v1/events?after=3&limit=10" })).status, 200)
        const status = yield* exact(url, { path: "/v1/effects?status=lost" })
        assert.strictEqual(status.status, 400)
        assert.strictEqual(
          status.body.message,
          "parameter 'status' must be one of pending, running, succeeded, failed, cancelled, quarantined, got 'lost'"
        )
      })
  )
})

describe("malformed requests get the documented { error, message } body", () => {
  it.scopedLive("an oversized header is 431 and bad percent-encoding is 400, both with a JSON body", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      const big = yield* exact(url, { path: "/health", headers: { "x-big": "a".repeat(20_000) } })
      assert.strictEqual(big.status, 431)
      assert.strictEqual(big.body.error, "RequestHeadersTooLarge")
      assert.isString(big.body.message)
      const garbage = yield* sendBytes(url, "NOT HTTP AT ALL\r\n\r\n")
      assert.match(garbage, /^HTTP\/1\.1 400 /)
      assert.include(garbage, '"error":"InvalidRequest"')
      for (const path of ["/v1/threads/%zz", "/v1/effects/%E0%A4%A", "/%"]) {
        const answer = yield* exact(url, { path })
        assert.strictEqual(answer.status, 400, path)
        assert.strictEqual(answer.body.error, "InvalidRequest", path)
        assert.include(answer.body.message, "percent-encoding")
      }
    })
  )
})

describe("thread ids that look like paths are refused at the API", () => {
  it.scopedLive(". and .. and ids with slashes, backslashes or control characters are 400 on both thread routes", () =>
    Effect.gen(function* () {
      const seen: Array<string> = []
      const domain = ServerDomain.make({
        ...accounts,
        threads: () =>
          Layer.succeed(ThreadViews, {
            getThread: (id) => Effect.sync(() => (seen.push(id), Option.none())),
            getTranscript: (id) => Effect.sync(() => (seen.push(id), Option.none()))
          })
      })
      const { url } = yield* startServer({ domain })
      for (const id of [
        "%2E",
        "%2E%2E",
        ".%2E",
        "a%2Fb",
        "%2E%2E%2Fetc",
        "a%5Cb",
        "a%00b",
        "a%0Ab",
        "..%5C..",
        "%2E%2E%2E"
      ]) {
        for (const suffix of ["", "/transcript"]) {
          const answer = yield* exact(url, { path: `/v1/threads/${id}${suffix}` })
          assert.strictEqual(answer.status, 400, `${id}${suffix}: ${answer.text}`)
          assert.strictEqual(answer.body.error, "InvalidRequest")
          assert.match(answer.body.message, /^parameter 'threadId' /)
        }
      }
      assert.deepStrictEqual(seen, [])
      assert.strictEqual((yield* exact(url, { path: "/v1/threads/t-1.a_b%23c" })).status, 404)
      assert.deepStrictEqual(seen, ["t-1.a_b#c"])
    })
  )
})
