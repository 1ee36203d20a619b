/**
 * `orchestrator triggers list` against a real server process: a trigger put through the front door
 * is listed with its next fire time, as a table and as JSON.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { cli, send, serverLayer, TestServer } from "./fixtures/processes.js"

layer(serverLayer(), { excludeTestServices: true })((it) => {
  describe("orchestrator triggers", () => {
    it.effect("list shows each trigger with its cron, time zone, thread and next fire time", () =>
      Effect.gen(function* () {
        const { url } = yield* TestServer
        const put = yield* send(url, {
          commandId: "put-tokyo",
          type: "trigger.put",
          triggerId: "tokyo-morning",
          cron: "0 9 * * *",
          timezone: "Asia/Tokyo",
          threadId: "jp",
          text: "ohayo"
        })
        assert.strictEqual(put.status, 200)
        const json = yield* cli(["triggers", "list", "--url", url, "--json"])
        assert.strictEqual(json.code, 0, json.stderr)
        const body = JSON.parse(json.stdout) as { triggers: Array<Record<string, unknown>> }
        assert.deepStrictEqual(
          body.triggers.map((t) => [t.triggerId, t.cron, t.timezone, t.threadId]),
          [["tokyo-morning", "0 9 * * *", "Asia/Tokyo", "jp"]]
        )
        // 09:00 in Tokyo is 00:00 UTC.
        assert.match(String(body.triggers[0]!.nextFireAt), /T00:00:00\.000Z$/)
        const table = yield* cli(["triggers", "list", "--url", url])
        assert.strictEqual(table.code, 0, table.stderr)
        assert.include(table.stdout, "tokyo-morning")
        assert.include(table.stdout, String(body.triggers[0]!.nextFireAt))
      })
    )
  })
})
