import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { cli, serverLayer, TestServer } from "./fixtures/processes.js"

const token = "cli-test-token-1"

layer(serverLayer({ API_TOKEN: token }), { excludeTestServices: true, timeout: 60_000 })(
  "the CLI against a server with API_TOKEN",
  (it) => {
    it.effect(
      "without a token, or with another one, server commands exit 4 and say which; --token or $API_TOKEN works",
      () =>
        Effect.gen(function* () {
          const { url } = yield* TestServer
          const missing = yield* cli(["effects", "list", "--url", url])
          assert.strictEqual(missing.code, 4)
          assert.include(missing.stderr, `the server at ${url} requires a token (401): pass --token or set API_TOKEN`)
          const wrong = yield* cli(["receipts", "show", "c1", "--url", url, "--token", "not-the-token"])
          assert.strictEqual(wrong.code, 4)
          assert.include(wrong.stderr, "refused the token (401)")
          const tail = yield* cli(["events", "tail", "--after", "0", "--url", url])
          assert.strictEqual(tail.code, 4)
          const withOption = yield* cli(["effects", "list", "--url", url, "--token", token, "--json"])
          assert.strictEqual(withOption.code, 0, withOption.stderr)
          assert.deepStrictEqual(JSON.parse(withOption.stdout), { effects: [] })
          const fromEnv = yield* cli(["--url", url, "effects", "list"], { API_TOKEN: token })
          assert.strictEqual(fromEnv.code, 0, fromEnv.stderr)
          assert.strictEqual(fromEnv.stdout.trim(), "no effects")
          // With the token, an unknown id is still a 404: exit 5, not 4.
          const unknown = yield* cli(["receipts", "show", "nope", "--url", url, "--token", token])
          assert.strictEqual(unknown.code, 5)
        })
    )
  }
)
