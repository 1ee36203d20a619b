/**
 * Approvals over HTTP: with APPROVAL=required an `execute` waits, `GET /v1/approvals` lists it with
 * its arguments (token-protected like every non-public route), `tool.approve` through the one front
 * door lets it run and the turn complete; a second approve is one approval; a deny after it is a 422
 * stored rejection. The policy is the operator's configuration, parsed with the rest.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Approval } from "@orchestration/agents"
import { Effect, Either } from "effect"
import { domain as agents } from "../src/AgentsDomain.js"
import { parseConfig } from "../src/Config.js"
import { onStore, postJson, raw, startServer, tempDataDir, waitFor } from "./fixtures/server.js"

const token = "approval-test-token"
const auth = { authorization: `Bearer ${token}` }
const script = (...steps: ReadonlyArray<unknown>) => JSON.stringify({ script: steps })

describe("approval configuration", () => {
  it("off by default; APPROVAL=required waits for execute and process-bound MCP tools for 24 h", () => {
    const unset = Either.getOrThrow(parseConfig({ NODE_ID: "n1" }, "/srv"))
    assert.deepStrictEqual(unset.approval, Approval.off)
    const required = Either.getOrThrow(parseConfig({ NODE_ID: "n1", APPROVAL: "required" }, "/srv"))
    assert.deepStrictEqual(required.approval, { mode: "required", timeoutMs: 24 * 3_600_000 })
    const tuned = Either.getOrThrow(
      parseConfig(
        { NODE_ID: "n1", APPROVAL: "required", APPROVAL_TIMEOUT: "90m", APPROVAL_TOOLS: "execute, fs__write" },
        "/srv"
      )
    )
    assert.deepStrictEqual(tuned.approval, {
      mode: "required",
      timeoutMs: 90 * 60_000,
      tools: ["execute", "fs__write"]
    })
  })

  it("a bad value names its variable", () => {
    const variableOf = (env: Record<string, string>) =>
      Either.match(parseConfig({ NODE_ID: "n1", ...env }, "/srv"), {
        onLeft: (e) => e.variable,
        onRight: () => "accepted"
      })
    assert.strictEqual(variableOf({ APPROVAL: "sometimes" }), "APPROVAL")
    assert.strictEqual(variableOf({ APPROVAL: "required", APPROVAL_TIMEOUT: "soon" }), "APPROVAL_TIMEOUT")
    assert.strictEqual(variableOf({ APPROVAL: "required", APPROVAL_TIMEOUT: "0s" }), "APPROVAL_TIMEOUT")
    assert.strictEqual(variableOf({ APPROVAL: "required", APPROVAL_TOOLS: "exec ute" }), "APPROVAL_TOOLS")
    assert.strictEqual(variableOf({ APPROVAL_TOOLS: "execute" }), "APPROVAL_TOOLS")
  })
})

describe("delegate timeout configuration", () => {
  it("DELEGATE_TIMEOUT sets the awaited delegate's default deadline (30 minutes when unset); a bad value names it", () => {
    assert.strictEqual(Either.getOrThrow(parseConfig({ NODE_ID: "n1" }, "/srv")).delegateTimeoutMs, 30 * 60_000)
    assert.strictEqual(
      Either.getOrThrow(parseConfig({ NODE_ID: "n1", DELEGATE_TIMEOUT: "90s" }, "/srv")).delegateTimeoutMs,
      90_000
    )
    for (const bad of ["soon", "0s", "2d"]) {
      const parsed = parseConfig({ NODE_ID: "n1", DELEGATE_TIMEOUT: bad }, "/srv")
      assert.strictEqual(Either.isLeft(parsed) && parsed.left.variable, "DELEGATE_TIMEOUT")
    }
  })
})

describe("approvals over HTTP", () => {
  it.scopedLive(
    "an execute waits, is listed with its arguments behind the token, and runs once approved through POST /v1/commands",
    () =>
      Effect.gen(function* () {
        const { url } = yield* startServer({
          domain: agents,
          env: { APPROVAL: "required", API_TOKEN: token }
        })
        const sent = yield* postJson(
          url,
          "/v1/commands",
          {
            commandId: "send-1",
            type: "message.send",
            threadId: "t1",
            messageId: "m1",
            text: script({ toolCalls: [{ name: "execute", arguments: { command: "echo approved" } }] }, { text: "ok" })
          },
          auth
        )
        assert.strictEqual(sent.status, 200)
        const pending = yield* waitFor(
          "a pending approval",
          Effect.map(raw(url, "/v1/approvals", { headers: auth }), (r) =>
            r.body.approvals?.length > 0 ? r.body.approvals : undefined
          )
        )
        assert.deepStrictEqual(
          pending.map((p: { threadId: string; callId: string; name: string; arguments: unknown }) => [
            p.threadId,
            p.callId,
            p.name,
            p.arguments
          ]),
          [["t1", "call_1_0", "execute", { command: "echo approved" }]]
        )
        assert.strictEqual((yield* raw(url, "/v1/approvals")).status, 401)
        const thread = yield* raw(url, "/v1/threads/t1", { headers: auth })
        assert.strictEqual(thread.body.turns[0].status, "awaiting-approval")

        const approve = { commandId: "approve-1", type: "tool.approve", threadId: "t1", callId: "call_1_0" }
        const first = yield* postJson(url, "/v1/commands", approve, auth)
        assert.strictEqual(first.status, 200)
        assert.deepStrictEqual(first.body.effectIds, ["tool:t1:m1:call_1_0"])
        const again = yield* postJson(url, "/v1/commands", { ...approve, commandId: "approve-2" }, auth)
        assert.deepStrictEqual([again.status, again.body.effectIds], [200, []])

        const done = yield* waitFor(
          "the turn completes",
          Effect.map(raw(url, "/v1/threads/t1", { headers: auth }), (r) =>
            r.body.turns?.[0]?.status === "completed" ? r.body : undefined
          ),
          20_000
        )
        assert.deepStrictEqual(
          [done.turns[0].toolCalls[0].status, done.turns[0].toolCalls[0].approval.status],
          ["succeeded", "approved"]
        )
        assert.strictEqual(JSON.parse(done.turns[0].toolCalls[0].result).stdout, "approved\n")
        assert.deepStrictEqual((yield* raw(url, "/v1/approvals", { headers: auth })).body, { approvals: [] })

        const late = yield* postJson(
          url,
          "/v1/commands",
          { commandId: "deny-1", type: "tool.deny", threadId: "t1", callId: "call_1_0", reason: "too late" },
          auth
        )
        assert.deepStrictEqual([late.status, late.body.reason], [422, "approval-conflict"])
      })
  )

  it.scopedLive(
    "a call whose stored arguments and a message of its thread are cut off: the approvals, thread and transcript routes answer and say what is unreadable",
    () =>
      Effect.gen(function* () {
        const dataDir = tempDataDir()
        const env = { APPROVAL: "required", API_TOKEN: token }
        // First life: an execute waits for approval.
        yield* Effect.scoped(
          Effect.gen(function* () {
            const { url } = yield* startServer({ domain: agents, env, dataDir })
            yield* postJson(
              url,
              "/v1/commands",
              {
                commandId: "send-1",
                type: "message.send",
                threadId: "t1",
                messageId: "m1",
                text: script({ toolCalls: [{ name: "execute", arguments: { command: "echo hi" } }] }, { text: "ok" })
              },
              auth
            )
            yield* waitFor(
              "a pending approval",
              Effect.map(raw(url, "/v1/approvals", { headers: auth }), (r) =>
                r.body.approvals?.length > 0 ? r.body.approvals : undefined
              )
            )
          })
        )
        // Between lives: the call's arguments and the user's message are cut off, as a hand edit would leave them.
        yield* onStore(
          dataDir,
          Effect.gen(function* () {
            const sql = yield* SqlClient
            yield* sql`UPDATE agent_tool_calls SET arguments = '{"command":' WHERE thread_id = 't1'`
            yield* sql`UPDATE agent_messages SET message = '{"role":"user","cont' WHERE thread_id = 't1' AND position = 1`
          })
        )
        const { url } = yield* startServer({ domain: agents, env, dataDir })
        const approvals = yield* raw(url, "/v1/approvals", { headers: auth })
        assert.strictEqual(approvals.status, 200)
        assert.deepStrictEqual(
          approvals.body.approvals.map((p: { callId: string; arguments: unknown; undecodable?: string }) => [
            p.callId,
            p.arguments,
            typeof p.undecodable
          ]),
          [["call_1_0", null, "string"]]
        )
        const transcript = yield* raw(url, "/v1/threads/t1/transcript", { headers: auth })
        assert.strictEqual(transcript.status, 200)
        assert.isFalse(transcript.body.valid)
        assert.deepStrictEqual(
          transcript.body.unreadableMessages.map((m: { position: number }) => m.position),
          [1]
        )
        const thread = yield* raw(url, "/v1/threads/t1", { headers: auth })
        assert.strictEqual(thread.status, 200)
        assert.deepStrictEqual(thread.body.unreadableMessages, transcript.body.unreadableMessages)
      })
  )
})
