import { assert, describe, it } from "@effect/vitest"
import { Engine } from "@orchestration/engine"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { threadView, transcriptView } from "../src/ThreadReadModel.js"
import { World } from "../src/World.js"
import { agentsStack, allTurnsTerminal, processesWith, script, send, waitFor } from "./fixtures/agents.js"

const execute = (command: string) => ({ name: "execute", arguments: { command } })
const bomb = "b(){ b|b& };b; sleep 1 # turn-bomb"

describe("a scripted turn runs real commands in the thread's sandbox", () => {
  it.effect("exit codes, output, the workspace between calls, the jail's refusals and the limits reach the model", () =>
    Effect.gen(function* () {
      const engine = yield* Engine.Engine
      const world = yield* World
      yield* engine.dispatchWithReceipt(
        send(
          "t1",
          "m1",
          script(
            { toolCalls: [execute("echo hi > f && cat f && exit 3")] },
            {
              toolCalls: [
                execute("cat f"),
                execute("cat /etc/shadow"),
                execute("getent hosts example.com"),
                execute("echo planted > /usr/planted"),
                execute(bomb),
                execute("head -c 100M /dev/zero")
              ]
            },
            { text: "done" }
          )
        )
      )
      yield* waitFor(allTurnsTerminal("t1", 1), "turn done", 120_000)
      assert.strictEqual((yield* threadView("t1"))!.turns[0]!.status, "completed")
      const transcript = (yield* transcriptView("t1"))!
      assert.isTrue(transcript.valid, JSON.stringify(transcript.problems))
      const [first, cat, shadow, dns, usr, forkBomb, flood] = transcript.messages
        .filter((m) => m.role === "tool")
        .map((m) => JSON.parse(String(m.content)))
      assert.deepStrictEqual([first.exitCode, first.stdout, first.signal, first.truncated], [3, "hi\n", null, false])
      assert.deepStrictEqual([cat.exitCode, cat.stdout], [0, "hi\n"])
      assert.notStrictEqual(shadow.exitCode, 0)
      assert.notStrictEqual(dns.exitCode, 0)
      assert.notStrictEqual(usr.exitCode, 0)
      assert.strictEqual(forkBomb.limit, "processes")
      assert.deepStrictEqual(processesWith("/bin/sh", "-c", bomb), [])
      assert.deepStrictEqual([flood.limit, flood.truncated], ["output", true])
      assert.isAtMost(flood.stdout.length, 64 * 1024)
      // Each command ran once, in the thread's workspace; nothing of the jail's reached the host.
      assert.strictEqual((yield* world.readExecutions).length, 7)
      assert.strictEqual(readFileSync(join(world.dir, "workspaces", "t1", "f"), "utf8"), "hi\n")
    }).pipe(Effect.provide(agentsStack()))
  )
})
