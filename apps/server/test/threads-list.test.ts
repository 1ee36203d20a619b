import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { domain as agents } from "../src/AgentsDomain.js"
import { client, postJson, raw, startServer, waitFor } from "./fixtures/server.js"

const createThreads = (url: string, ids: ReadonlyArray<string>) =>
  Effect.forEach(ids, (threadId) =>
    Effect.map(
      postJson(url, "/v1/commands", {
        commandId: `create-${threadId}`,
        type: "thread.create",
        threadId,
        title: `title ${threadId}`
      }),
      (r) => assert.strictEqual(r.status, 200)
    )
  )

describe("GET /v1/threads", () => {
  it.scopedLive("pages newest first with limit and after=next until next is null, reading each thread once", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ domain: agents })
      yield* createThreads(url, ["a", "b", "c", "d", "e"])
      const first = yield* raw(url, "/v1/threads?limit=2")
      assert.strictEqual(first.status, 200)
      assert.deepStrictEqual(
        first.body.threads.map((t: { threadId: string }) => t.threadId),
        ["e", "d"]
      )
      assert.isNumber(first.body.next)
      assert.deepStrictEqual(first.body.counts, { idle: 5 })
      const second = yield* raw(url, `/v1/threads?limit=2&after=${first.body.next}`)
      assert.deepStrictEqual(
        second.body.threads.map((t: { threadId: string }) => t.threadId),
        ["c", "b"]
      )
      const last = yield* raw(url, `/v1/threads?limit=2&after=${second.body.next}`)
      assert.deepStrictEqual(
        last.body.threads.map((t: { threadId: string }) => t.threadId),
        ["a"]
      )
      assert.isNull(last.body.next)
      // The typed client decodes the same page.
      const api = yield* client(url)
      const all = yield* api.threads.list({ urlParams: {} })
      assert.strictEqual(all.threads.length, 5)
      assert.deepStrictEqual(all.threads[4], {
        threadId: "a",
        title: "title a",
        status: "idle",
        updatedSequence: 1,
        turnCount: 0,
        queuedTurns: 0,
        lastSequence: 1,
        lastEventAt: all.threads[4]!.lastEventAt,
        latestTurn: null
      })
      assert.isAbove(all.threads[4]!.lastEventAt, 0)
    })
  )

  it.scopedLive("order=oldest pages from the least recently changed thread, with the same cursor rule", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ domain: agents })
      yield* createThreads(url, ["a", "b", "c"])
      const first = yield* raw(url, "/v1/threads?limit=2&order=oldest")
      assert.deepStrictEqual(
        first.body.threads.map((t: { threadId: string }) => t.threadId),
        ["a", "b"]
      )
      const last = yield* raw(url, `/v1/threads?limit=2&order=oldest&after=${first.body.next}`)
      assert.deepStrictEqual(
        last.body.threads.map((t: { threadId: string }) => t.threadId),
        ["c"]
      )
      assert.isNull(last.body.next)
    })
  )

  it.scopedLive(
    "a thread's latest turn carries its status, steps and times; status= filters, counts cover all threads",
    () =>
      Effect.gen(function* () {
        const { url } = yield* startServer({ domain: agents })
        yield* createThreads(url, ["keep", "gone"])
        yield* postJson(url, "/v1/commands", {
          commandId: "m-1",
          type: "message.send",
          threadId: "keep",
          messageId: "m1",
          text: "hello"
        })
        yield* postJson(url, "/v1/commands", { commandId: "del-1", type: "thread.delete", threadId: "gone" })
        const page = yield* waitFor(
          "the turn to complete",
          Effect.map(raw(url, "/v1/threads?status=idle"), (r) =>
            r.body.threads[0]?.latestTurn?.status === "completed" ? r.body : undefined
          )
        )
        assert.deepStrictEqual(
          page.threads.map((t: { threadId: string }) => t.threadId),
          ["keep"]
        )
        const turn = page.threads[0].latestTurn
        assert.strictEqual(turn.turnId, "keep:m1")
        assert.strictEqual(turn.steps, 1)
        assert.isAtLeast(turn.updatedAt, turn.queuedAt)
        assert.strictEqual(page.threads[0].turnCount, 1)
        assert.deepStrictEqual(page.counts, { idle: 1, deleted: 1 })
        const deleted = yield* raw(url, "/v1/threads?status=deleted")
        assert.deepStrictEqual(
          deleted.body.threads.map((t: { threadId: string }) => t.threadId),
          ["gone"]
        )
        assert.deepStrictEqual((yield* raw(url, "/v1/threads?status=running")).body.threads, [])
      })
  )

  it.scopedLive("bad parameters are 400 with a JSON body naming the parameter", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ domain: agents })
      for (const query of [
        "limit=0",
        "limit=501",
        "limit=ten",
        "after=-1",
        "after=x",
        "status=stuck",
        "order=random"
      ]) {
        const answer = yield* raw(url, `/v1/threads?${query}`)
        assert.strictEqual(answer.status, 400, query)
        assert.strictEqual(answer.body.error, "InvalidRequest", query)
        assert.strictEqual(answer.body.issues[0].path[0], query.split("=")[0], query)
      }
    })
  )

  it.scopedLive("a domain without thread views answers 404", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer()
      const answer = yield* raw(url, "/v1/threads")
      assert.strictEqual(answer.status, 404)
      assert.strictEqual(answer.body.error, "NotFound")
    })
  )
})
