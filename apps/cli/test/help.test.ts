import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { cli } from "./fixtures/processes.js"

/** Any ANSI escape sequence (colour, bold): none may reach a pipe. */
const ansi = /\u001b\[/

describe("help read through a pipe", () => {
  it.live(
    "--help through a pipe (and with NO_COLOR) is plain text, and each option says what it is for, not its type",
    () =>
      Effect.gen(function* () {
        const root = yield* cli(["--help"])
        const list = yield* cli(["effects", "list", "--help"])
        const noColor = yield* cli(["effects", "list", "--help"], { NO_COLOR: "1" })
        for (const result of [root, list, noColor]) {
          assert.strictEqual(result.code, 0, result.stderr)
          assert.notMatch(result.stdout, ansi)
          assert.notInclude(result.stdout, "A user-defined piece of text")
          assert.notInclude(result.stdout, "A true or false value")
        }
        assert.include(root.stdout, "The server's base URL.")
        assert.include(list.stdout, "Only effects owned by this thread (its aggregate id).")
        assert.include(list.stdout, "At most this many rows, oldest first (1-1000).")
        // A choice keeps its list of values: that sentence says what is allowed.
        assert.include(list.stdout, "One of the following: pending, running, succeeded, failed, cancelled")
        assert.strictEqual(noColor.stdout, list.stdout)
      }),
    120_000
  )

  it.live(
    "a usage error piped to stderr is plain text too",
    () =>
      Effect.gen(function* () {
        const unknown = yield* cli(["effects", "list", "--limt", "3"])
        assert.strictEqual(unknown.code, 2)
        assert.notMatch(unknown.stderr, ansi)
        const bare = yield* cli(["effects"])
        assert.notMatch(bare.stdout + bare.stderr, ansi)
      }),
    120_000
  )
})
