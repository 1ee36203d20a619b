/**
 * A model step's tool-call argument deltas on GET /v1/threads/:threadId/stream (`event: tool-delta`),
 * beside its text deltas: real HTTP server, real SQLite file, a provider the test feeds part by part.
 * Each call's deltas are contiguous and concatenate to the arguments the step recorded; a client
 * resuming with Last-Event-ID mid-arguments sees each piece exactly once.
 */
import { assert, describe, it } from "@effect/vitest"
import { Thread } from "@orchestration/agents"
import { Effect, Exit, Scope } from "effect"
import { make as agentsDomain } from "../src/AgentsDomain.js"
import * as HeldProvider from "./fixtures/heldProvider.js"
import { effectStatus, postJson, startServer, waitFor } from "./fixtures/server.js"
import { openSse, type SseMessage, until } from "./fixtures/sse.js"

const of = (event: string) => (messages: ReadonlyArray<SseMessage>) => messages.filter((m) => m.event === event)
const argsOf = (messages: ReadonlyArray<SseMessage>, callId: string) =>
  of("tool-delta")(messages)
    .filter((m) => m.data.toolCallId === callId)
    .map((m) => m.data.text)
    .join("")
const has = (type: string) => (messages: ReadonlyArray<SseMessage>) =>
  messages.some((m) => m.event === "thread-event" && m.data.type === type)

describe("tool-call argument deltas on the thread stream", () => {
  it.scopedLive(
    "event tool-delta carries each call's arguments as they stream, contiguous per call, resumable without repeats",
    () =>
      Effect.gen(function* () {
        const provider = yield* HeldProvider.make
        const { url } = yield* startServer({ domain: agentsDomain({ provider: provider.layer }) })
        const feed = yield* provider.next
        yield* postJson(url, "/v1/commands", {
          commandId: "send-td-m1",
          type: "message.send",
          threadId: "td",
          messageId: "m1",
          text: "publish it"
        })
        const effectId = Thread.stepEffectId("td:m1", 1)
        yield* waitFor(
          "step running",
          Effect.map(effectStatus(url, effectId), (row) => (row.status === "running" ? row : undefined))
        )
        const args = { path: "notes.md", content: "hi 👋" }
        const json = JSON.stringify(args)
        const firstScope = yield* Scope.make()
        const first = yield* openSse(url, "/v1/threads/td/stream").pipe(Scope.extend(firstScope))
        yield* feed.text("Publishing.")
        yield* feed.toolArgs("call_a", "publish", json.slice(0, 10))
        yield* until("the first argument delta", first, (ms) => argsOf(ms, "call_a") === json.slice(0, 10))
        yield* Scope.close(firstScope, Exit.void)
        const lastId = first.messages.at(-1)!.id!
        yield* feed.toolArgs("call_a", "publish", json.slice(10))
        const second = yield* openSse(url, "/v1/threads/td/stream", { "last-event-id": lastId })
        yield* until("the rest of the arguments", second, (ms) => argsOf([...first.messages, ...ms], "call_a") === json)
        const next = yield* provider.next
        yield* feed.respond({ text: "Publishing.", toolCalls: [{ id: "call_a", name: "publish", arguments: args }] })
        yield* next.finish("done")
        yield* until("turn.completed", second, has("turn.completed"))
        const all = [...first.messages, ...second.messages]
        const ids = all.map((m) => m.id)
        assert.strictEqual(new Set(ids).size, ids.length, "no message twice")
        const toolDeltas = of("tool-delta")(all)
        let offset = 0
        for (const d of toolDeltas) {
          assert.deepStrictEqual(
            [d.data.turnId, d.data.step, d.data.attempt, d.data.toolCallId, d.data.offset],
            ["td:m1", 1, 1, "call_a", offset]
          )
          offset += d.data.text.length
        }
        assert.strictEqual(argsOf(all, "call_a"), json)
        // The text deltas are the text alone, with text offsets.
        assert.deepStrictEqual(
          of("delta")(all).map((d) => [d.data.step, d.data.offset, d.data.text]),
          [[1, 0, "Publishing."]]
        )
        const responded = all.find((m) => m.event === "thread-event" && m.data.type === "model.responded")!
        assert.deepStrictEqual(JSON.parse(argsOf(all, "call_a")), responded.data.payload.toolCalls[0].arguments)
        // A fresh read from the start gives the same pieces, merged per call.
        const fresh = yield* openSse(url, "/v1/threads/td/stream")
        yield* until("fresh turn.completed", fresh, has("turn.completed"))
        assert.strictEqual(argsOf(fresh.messages, "call_a"), json)
      })
  )
})
