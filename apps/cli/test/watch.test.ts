/**
 * `orchestrator threads watch` (a real CLI process) against a real server in this process, whose
 * model step streams what the test feeds it; the agents reactor records that text through the
 * engine's StreamIngest, as it does for a real provider.
 */
import { assert, describe, it } from "@effect/vitest"
import { NodeHttpServer } from "@effect/platform-node"
import { ModelProvider, type Provider, Thread } from "@orchestration/agents"
import { Config, Server } from "@orchestration/server"
import { make as agentsDomain } from "@orchestration/server/agents"
import { Effect, Either, Layer, Logger, LogLevel, Queue, Stream } from "effect"
import { createServer } from "node:http"
import { exitOf, start, tempDir, waitForOutput } from "./fixtures/processes.js"

/** A model step that streams what the test feeds it, then answers with `finish`. */
const startHeld = Effect.gen(function* () {
  const feeds = yield* Queue.unbounded<Queue.Queue<Provider.ModelStepPart>>()
  const provider = Layer.succeed(ModelProvider, {
    step: () => Effect.dieMessage("the held provider only streams"),
    stream: () =>
      Stream.unwrap(Effect.map(Queue.take(feeds), (parts) => Stream.fromQueue(parts))).pipe(
        Stream.takeUntil((part) => part.type === "finished")
      )
  })
  const env = { DATA_DIR: tempDir(), PORT: "0", NODE_ID: "watch-test", SHUTDOWN_GRACE_MS: "1000" }
  const started = yield* Server.start(
    { config: Either.getOrThrow(Config.parseConfig(env)), domain: agentsDomain({ provider }), env },
    NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })
  ).pipe(Logger.withMinimumLogLevel(LogLevel.Error))
  const next = Effect.gen(function* () {
    const parts = yield* Queue.unbounded<Provider.ModelStepPart>()
    yield* Queue.offer(feeds, parts)
    return {
      text: (text: string) => Queue.offer(parts, { type: "text-delta", text }),
      finish: (text: string) => Queue.offer(parts, { type: "finished", response: { text, toolCalls: [] } })
    }
  })
  return { ...started, next }
})

const post = (url: string, body: unknown) =>
  Effect.promise(() =>
    fetch(`${url}/v1/commands`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body)
    }).then((r) => r.status)
  )

const effectRow = (url: string, effectId: string) =>
  Effect.promise(() =>
    fetch(`${url}/v1/effects/${encodeURIComponent(effectId)}`).then(
      (r) => r.json() as Promise<{ status: string; attempts: number }>
    )
  )

const untilRunning = (url: string, effectId: string) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 10_000
    while ((yield* effectRow(url, effectId)).status !== "running") {
      if (Date.now() > deadline) return yield* Effect.dieMessage(`${effectId} never ran`)
      yield* Effect.sleep("25 millis")
    }
  })

describe("orchestrator threads watch", () => {
  it.scopedLive(
    "prints the answer as it grows and the events; --until-idle exits 0 when the turn ends",
    () =>
      Effect.gen(function* () {
        const server = yield* startHeld
        const feed = yield* server.next
        assert.strictEqual(
          yield* post(server.url, {
            commandId: "w1",
            type: "message.send",
            threadId: "tw",
            messageId: "m1",
            text: "hi"
          }),
          200
        )
        const effectId = Thread.stepEffectId("tw:m1", 1)
        yield* untilRunning(server.url, effectId)
        const json = yield* start(["threads", "watch", "tw", "--json", "--url", server.url])
        const readable = yield* start(["threads", "watch", "tw", "--until-idle", "--url", server.url])
        yield* feed.text("Hello")
        const first = yield* waitForOutput(json, "the first delta", (lines) =>
          lines.map((l) => JSON.parse(l)).find((m) => m._tag === "Delta")
        )
        assert.deepStrictEqual(first.delta, { turnId: "tw:m1", step: 1, attempt: 1, offset: 0, text: "Hello" })
        // Printed while the step still runs: its outcome has not committed.
        assert.strictEqual((yield* effectRow(server.url, effectId)).status, "running")
        assert.strictEqual(readable.child.exitCode, null)
        yield* feed.text(", watcher")
        yield* feed.finish("Hello, watcher")
        assert.strictEqual((yield* exitOf(readable)).code, 0, readable.stderr.join(""))
        const lines = readable.stdout
        assert.include(lines, "assistant (step 1, attempt 1): Hello, watcher", lines.join("\n"))
        assert.isTrue(
          lines.some((l) => /^\[\d+\] turn\.completed {2}tw:m1 in 1 step\(s\)$/.test(l)),
          lines.join("\n")
        )
        assert.isTrue(lines.some((l) => /^\[\d+\] turn\.started {2}tw:m1: hi$/.test(l)))
        // The answer streamed, so it is not printed a second time from the event.
        assert.isFalse(lines.some((l) => l.startsWith("assistant: ")))
        const all = yield* waitForOutput(json, "turn.completed", (ls) =>
          ls.some((l) => l.includes('"turn.completed"')) ? ls.map((l) => JSON.parse(l)) : undefined
        )
        const text = all
          .filter((m) => m._tag === "Delta")
          .map((m) => m.delta.text)
          .join("")
        assert.strictEqual(text, "Hello, watcher")
        json.child.kill("SIGINT")
        assert.strictEqual((yield* exitOf(json)).code, 0)
      }),
    60_000
  )
})
