import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger, LogLevel } from "effect"
import { maxEchoed } from "../src/ClientValue.js"
import { exact } from "./fixtures/rawHttp.js"
import { startServer } from "./fixtures/server.js"

const json = { "content-type": "application/json" }
/** The longest answer or log line a refused oversized value may produce. */
const bound = 2_000

describe("oversized client values are clipped wherever they are echoed or logged", () => {
  it.scopedLive("a 100 KB command id, type or parameter costs a short answer and short log lines", () =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      const capture = Logger.make(({ annotations, message }) => {
        lines.push(JSON.stringify({ message, annotations: Object.fromEntries(annotations) }))
      })
      const { url } = yield* startServer({ logLevel: LogLevel.Info }).pipe(
        Effect.provide(Logger.replace(Logger.defaultLogger, capture))
      )
      const huge = "a".repeat(100_000)
      const answers = [
        yield* exact(url, {
          method: "POST",
          path: "/v1/commands",
          headers: json,
          body: JSON.stringify({ commandId: huge, type: "account.open", accountId: "a", owner: "x" })
        }),
        yield* exact(url, {
          method: "POST",
          path: "/v1/commands",
          headers: json,
          body: JSON.stringify({ commandId: "c-1", type: huge, accountId: "a", owner: "x" })
        }),
        yield* exact(url, {
          method: "POST",
          path: "/v1/commands",
          headers: { "content-type": `text/${huge.slice(0, 8_000)}` },
          body: "{}"
        }),
        yield* exact(url, { path: `/v1/effects?status=${huge.slice(0, 10_000)}` }),
        yield* exact(url, { path: `/v1/effects/${huge.slice(0, 10_000)}` }),
        yield* exact(url, { path: `/v1/commands/${huge.slice(0, 10_000)}` }),
        yield* exact(url, { path: `/v1/${huge.slice(0, 10_000)}` })
      ]
      for (const answer of answers) {
        assert.isAtLeast(answer.status, 400)
        assert.isBelow(answer.text.length, bound, answer.text.slice(0, 300))
        assert.isString(answer.body.error)
      }
      // The dashboard's static route answers in text, clipped all the same.
      const asset = yield* exact(url, { path: `/assets/${huge.slice(0, 10_000)}.js` })
      assert.strictEqual(asset.status, 404)
      assert.isBelow(asset.text.length, bound)
      assert.include(answers[0]!.body.commandId, `(${huge.length} characters)`)
      assert.isAtMost(answers[0]!.body.commandId.length, maxEchoed + 30)
      assert.isAbove(lines.length, 0)
      for (const line of lines) assert.isBelow(line.length, bound, line.slice(0, 300))
    })
  )
})
