/**
 * `orchestrator threads watch --until-idle` (a real CLI process) against the real server (a child
 * process, started by the shared ServerChild helper) whose scripted model streams a tool call's
 * arguments: what the watcher printed of them (event: tool-delta) is the recorded arguments.
 * Not asserted: that they were printed in several pieces. On a loaded machine the watcher
 * connected only after the step had streamed (it then gets the call's chunks as one delta).
 */
import { assert, describe, it } from "@effect/vitest"
import { healthy, servingUrl, spawnServer } from "@orchestration/server/testing"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { cliMain, request, scriptedTurn, send, tempDir, waitUntil } from "./fixtures/processes.js"

/** `orchestrator <args>` to its end, with every stdout chunk as it arrived. */
const watch = (args: ReadonlyArray<string>) =>
  Effect.promise(
    () =>
      new Promise<{ code: number | null; chunks: Array<string>; stderr: string }>((resolve, reject) => {
        const child = spawn(process.execPath, [cliMain, ...args], {
          env: { PATH: process.env.PATH ?? "" },
          stdio: ["ignore", "pipe", "pipe"]
        })
        const chunks: Array<string> = []
        let stderr = ""
        child.stdout.setEncoding("utf8").on("data", (chunk: string) => chunks.push(chunk))
        child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
        const timer = setTimeout(() => {
          child.kill("SIGKILL")
          reject(new Error(`threads watch did not end within 60 s:\n${chunks.join("")}\n${stderr}`))
        }, 60_000)
        child.on("exit", (code) => {
          clearTimeout(timer)
          resolve({ code, chunks, stderr })
        })
      })
  )

describe("orchestrator threads watch against a server process", () => {
  it.scopedLive(
    "prints a streamed tool call's arguments (event tool-delta); they are the recorded arguments",
    () =>
      Effect.gen(function* () {
        const server = yield* Effect.acquireRelease(
          Effect.sync(() =>
            spawnServer({
              env: {
                DATA_DIR: tempDir("watch-process-"),
                PORT: "0",
                NODE_ID: "watch-process",
                SHUTDOWN_GRACE_MS: "1000"
              }
            })
          ),
          (child) => Effect.sync(() => child.child.kill("SIGKILL"))
        )
        const url = yield* Effect.promise(() => servingUrl(server, 60_000))
        yield* Effect.promise(() => healthy(server, url, 60_000))
        // Every part streams 2 s after the one before: three text pieces, then the arguments, 8 code
        // points a delta, so a watcher that starts in time sees them arrive over several flushes.
        const content = "a short note"
        const answer = yield* send(
          url,
          scriptedTurn("watch-tools", "tw", "m1", [
            {
              chunks: ["Publishing ", "the ", "note."],
              toolCalls: [{ name: "publish", arguments: { path: "n.md", content } }],
              chunkDelayMs: 2000
            },
            { text: "published" }
          ])
        )
        assert.strictEqual(answer.status, 200, JSON.stringify(answer.body))
        const run = yield* watch(["threads", "watch", "tw", "--until-idle", "--url", url])
        const output = run.chunks.join("")
        assert.strictEqual(run.code, 0, `${output}\n${run.stderr}`)

        const transcript = yield* waitUntil(
          "the transcript",
          Effect.map(request(url, "/v1/threads/tw/transcript"), (r) => (r.status === 200 ? r.body : undefined))
        )
        const call = transcript.messages.find((m: any) => m.role === "assistant" && m.tool_calls?.length > 0)
          ?.tool_calls[0]
        assert.isDefined(call, JSON.stringify(transcript))
        // The transcript holds the arguments as the JSON text the model sent (OpenAI's format).
        const recorded: string = call.function.arguments
        const head = `tool call ${call.id} (step 1, attempt 1) arguments: `
        // What it printed of the call is the recorded arguments, whole, under one head.
        const line = output.split("\n").find((l) => l.startsWith(head))
        assert.strictEqual(line, `${head}${recorded}`, output)
        assert.include(output, "assistant (step 1, attempt 1): Publishing the note.")
      }),
    150_000
  )
})
