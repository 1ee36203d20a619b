/**
 * `orchestrator approvals list|approve|deny` against a real server process with APPROVAL=required:
 * the waiting call is listed with its arguments, approving it lets the turn complete, repeating the
 * approval is answered from its receipt, and a deny afterwards is refused (approval-conflict).
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { cli, scriptedTurn, send, serverLayer, TestServer, threadStatus, waitUntil } from "./fixtures/processes.js"

layer(serverLayer({ APPROVAL: "required" }), { excludeTestServices: true })((it) => {
  describe("orchestrator approvals", () => {
    it.effect("list shows the waiting call with its arguments; approve runs it; deny after approve is refused", () =>
      Effect.gen(function* () {
        const { url } = yield* TestServer
        const sent = yield* send(
          url,
          scriptedTurn("send-a1", "t-appr", "m1", [
            { toolCalls: [{ name: "execute", arguments: { command: "echo from-cli" } }] },
            { text: "ran it" }
          ])
        )
        assert.strictEqual(sent.status, 200)
        const json = yield* waitUntil(
          "the call listed",
          Effect.map(cli(["approvals", "list", "--url", url, "--json"]), (r) => {
            const body = JSON.parse(r.stdout) as { approvals: Array<{ callId: string; arguments: unknown }> }
            return body.approvals.length > 0 ? body : undefined
          })
        )
        assert.deepStrictEqual(
          json.approvals.map((a) => [a.callId, a.arguments]),
          [["call_1_0", { command: "echo from-cli" }]]
        )
        const table = yield* cli(["approvals", "list", "--url", url])
        assert.include(table.stdout, "t-appr")
        assert.include(table.stdout, "echo from-cli")

        const approved = yield* cli(["approvals", "approve", "t-appr", "call_1_0", "--url", url, "--note", "fine"])
        assert.strictEqual(approved.code, 0, approved.stderr)
        assert.include(approved.stdout, "accepted")
        // The same answer again is its receipt; another note is one more accepted approval that changes nothing.
        const again = yield* cli(["approvals", "approve", "t-appr", "call_1_0", "--url", url, "--note", "fine"])
        assert.strictEqual(again.code, 0, again.stderr)
        assert.include(again.stdout, "duplicate")
        const other = yield* cli(["approvals", "approve", "t-appr", "call_1_0", "--url", url])
        assert.strictEqual(other.code, 0, other.stderr)
        assert.match(other.stdout, /events\s+-\n/)

        yield* waitUntil(
          "the turn to complete",
          Effect.map(threadStatus(url, "t-appr"), (t) => (t.turns[0]?.status === "completed" ? t : undefined))
        )
        const denied = yield* cli(["approvals", "deny", "t-appr", "call_1_0", "--url", url, "--reason", "late"])
        assert.strictEqual(denied.code, 8)
        assert.include(
          denied.stderr,
          "CommandRejected (422): call 'call_1_0' was approved already; it cannot be denied now"
        )
        const none = yield* cli(["approvals", "list", "--url", url])
        assert.include(none.stdout, "no calls await approval")
      })
    )
  })
})
