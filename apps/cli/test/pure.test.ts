import { Options, ValidationError } from "@effect/cli"
import * as HelpDoc from "@effect/cli/HelpDoc"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Chunk, Effect, Exit, FiberId, Stream } from "effect"
import * as CliErrors from "../src/CliErrors.js"
import * as Check from "../src/db/Check.js"
import { renderApprovals } from "../src/commands/Approvals.js"
import { renderEffect } from "../src/commands/Effects.js"
import { renderHealth } from "../src/commands/Status.js"
import { renderThread } from "../src/commands/Threads.js"
import * as Help from "../src/Help.js"
import { fromHttpFailure, sseMessages } from "../src/ServerClient.js"
import { ApiErrors } from "@orchestration/server"
import { HttpApiSchema } from "@effect/platform"

describe("exit codes, mapped in one place", () => {
  it("each error has its documented code; interruption and help are 0; a usage error from the parser is 2", () => {
    const code = (error: unknown) => CliErrors.outcomeOf(Exit.fail(error)).code
    assert.strictEqual(CliErrors.outcomeOf(Exit.void).code, 0)
    assert.strictEqual(CliErrors.outcomeOf(Exit.failCause(Cause.interrupt(FiberId.none))).code, 0)
    assert.strictEqual(code(new CliErrors.ProblemsFound({ count: 2, message: "2" })), 1)
    assert.strictEqual(code(new CliErrors.UsageError({ message: "bad" })), 2)
    assert.strictEqual(code(ValidationError.missingValue(HelpDoc.p("x"))), 2)
    assert.strictEqual(code(new CliErrors.ServerUnreachable({ url: "u", message: "m" })), 3)
    assert.strictEqual(code(new CliErrors.Unauthorized({ url: "u", tokenSent: false, message: "m" })), 4)
    assert.strictEqual(code(new CliErrors.NotFound({ message: "m" })), 5)
    assert.strictEqual(code(new CliErrors.StoreBusy({ file: "f", message: "m" })), 6)
    assert.strictEqual(code(new CliErrors.Conflict({ error: "CommandIdConflict", message: "m" })), 7)
    assert.strictEqual(code(new CliErrors.Refused({ status: 422, error: "CommandRejected", message: "m" })), 8)
    assert.strictEqual(code(new CliErrors.ServerFailed({ status: 503, error: "StorageUnavailable", message: "m" })), 1)
    // The report was printed already: no second line on stderr.
    assert.isUndefined(CliErrors.outcomeOf(Exit.fail(new CliErrors.ProblemsFound({ count: 1, message: "1" }))).message)
    assert.strictEqual(
      CliErrors.outcomeOf(Exit.fail(new CliErrors.NotFound({ message: "no effect 'x'" }))).message,
      "error: no effect 'x'"
    )
    assert.strictEqual(CliErrors.outcomeOf(Exit.die(new Error("boom"))).code, 1)
  })
})

describe("server errors, as the CLI reads them", () => {
  it("every error the server puts on the wire keeps its status, and so its exit code", () => {
    const connection = { url: "http://127.0.0.1:1", token: undefined, json: false }
    for (const [tag, schema] of Object.entries(ApiErrors.Wire)) {
      const status = HttpApiSchema.getStatusError(schema)
      const error = fromHttpFailure(connection)({ _tag: tag, message: "m" })
      // 401, 404 and 409 are errors of their own; every other carries the status it came with.
      const ownStatus: Record<string, number> = { Unauthorized: 401, NotFound: 404, Conflict: 409 }
      const seen = "status" in error ? error.status : ownStatus[error._tag]
      assert.strictEqual(seen, status, `${tag}: the server answers ${status}`)
    }
  })

  it("a refusal of the request's host or origin (403) is refused input, exit 8, not a server failure", () => {
    const connection = { url: "http://127.0.0.1:1", token: undefined, json: false }
    const error = fromHttpFailure(connection)({ _tag: "Forbidden", message: "this server does not answer to Host 'x'" })
    assert.strictEqual(error._tag, "Refused")
    assert.strictEqual(CliErrors.exitCodeOfError(error), 8)
  })
})

describe("db check rules", () => {
  it("a process-bound effect id with two ledger lines was performed twice; replay-safe kinds may repeat", () => {
    const bound = (kind: string) => kind === "tool.execute"
    const entries = [
      { effectId: "x1", kind: "tool.execute", attempt: 1 },
      { effectId: "p1", kind: "tool.publish", attempt: 1 },
      { effectId: "x2", kind: "tool.execute", attempt: 1 },
      { effectId: "p1", kind: "tool.publish", attempt: 2 },
      { effectId: "x1", kind: "tool.execute", attempt: 2 }
    ]
    const problems = Check.ledgerProblems(entries, bound)
    assert.deepStrictEqual(
      problems.map((p) => [p.check, p.subject]),
      [["ledger-repeated", "effect x1"]]
    )
    assert.include(problems[0]!.message, "2 ledger entries (attempts 1, 2) for one tool.execute effect")
    assert.deepStrictEqual(Check.ledgerProblems(entries.slice(0, 3), bound), [])
  })

  it("an MCP call's ledger line carries its own policy: a repeated read-only call is fine, a repeated other one is not", () => {
    const lines = [
      { effectId: "r1", kind: "tool.mcp_call", attempt: 1, onProcessLoss: "replay-safe" },
      { effectId: "r1", kind: "tool.mcp_call", attempt: 2, onProcessLoss: "replay-safe" },
      { effectId: "w1", kind: "tool.mcp_call", attempt: 1, onProcessLoss: "process-bound" },
      { effectId: "w1", kind: "tool.mcp_call", attempt: 2, onProcessLoss: "process-bound" }
    ]
    const bound = (kind: string, entry: Check.LedgerLine) =>
      entry.onProcessLoss === undefined ? kind === "tool.execute" : entry.onProcessLoss === "process-bound"
    assert.deepStrictEqual(
      Check.ledgerProblems(lines, bound).map((p) => p.subject),
      ["effect w1"]
    )
  })
})

describe("the event stream's framing", () => {
  it.effect("events become messages; heartbeats are skipped; the server's error event is told apart", () =>
    Effect.gen(function* () {
      const event = {
        sequence: 7,
        eventId: "c/event-0",
        aggregateType: "thread",
        aggregateId: "t1",
        version: 1,
        type: "thread.created",
        payload: {},
        commandId: "c",
        occurredAt: 1
      }
      const lines = [
        ": connected",
        "",
        "id: 7",
        "event: thread.created",
        `data: ${JSON.stringify(event)}`,
        "",
        ": keep-alive",
        "",
        "event: error",
        'data: {"error":"StorageUnavailable","message":"disk full"}',
        ""
      ]
      const messages = Chunk.toReadonlyArray(yield* Stream.runCollect(sseMessages(Stream.fromIterable(lines))))
      assert.deepStrictEqual(messages, [
        { _tag: "Event", event },
        { _tag: "StreamError", error: "StorageUnavailable", message: "disk full" }
      ])
    })
  )
})

describe("help as its reader gets it", () => {
  it("colour only on a terminal, and never with NO_COLOR or TERM=dumb", () => {
    assert.isTrue(Help.colourWanted({ isTTY: true }, {}))
    assert.isFalse(Help.colourWanted({ isTTY: false }, {}))
    assert.isFalse(Help.colourWanted({}, {}))
    assert.isFalse(Help.colourWanted({ isTTY: true }, { NO_COLOR: "1" }))
    assert.isTrue(Help.colourWanted({ isTTY: true }, { NO_COLOR: "" }))
    assert.isFalse(Help.colourWanted({ isTTY: true }, { TERM: "dumb" }))
    assert.strictEqual(Help.plain("\u001b[0;1mOPTIONS\u001b[0m and text"), "OPTIONS and text")
  })

  it("a described option says what it is for, not its type; a choice keeps the values it allows", () => {
    const help = (options: Options.Options<unknown>) =>
      HelpDoc.toAnsiText(Help.withoutTypeSentences(Options.getHelp(options)))
    const url = help(Options.text("url").pipe(Options.withDescription("The server's base URL.")))
    assert.notInclude(url, "A user-defined piece of text")
    assert.include(url, "The server's base URL.")
    const status = help(Options.choice("status", ["failed", "cancelled"]).pipe(Options.withDescription("Only these.")))
    assert.include(status, "One of the following: failed, cancelled")
    // Without a description of its own, the type's sentence is all there is: it stays.
    assert.include(help(Options.integer("limit")), "An integer.")
  })
})

describe("the status report", () => {
  it("names each degraded component (an MCP server that is not up) with its reason", () => {
    const text = renderHealth("http://x", {
      status: "degraded",
      storage: { freeBytes: 1e9, floorBytes: 1e6, writable: true },
      engine: { active: true, head: 1, queueDepth: 0 },
      reactors: [],
      outbox: { pending: 0, running: 0, failed: 0, quarantined: 0 },
      database: {
        backend: "sqlite",
        nodeId: "n",
        connected: true,
        latencyMs: 1,
        acceptsWrites: true,
        liveOwners: [],
        oldestWriterMs: 0
      },
      components: [
        { name: "mcp:fixture", status: "ok", message: "ready, 4 tools" },
        { name: "mcp:broken", status: "degraded", message: "failed: failed to start: spawn nope ENOENT" }
      ]
    })
    assert.match(text, /^mcp:fixture\s+ok\s+ready, 4 tools$/m)
    assert.match(text, /^mcp:broken\s+DEGRADED\s+failed: failed to start: spawn nope ENOENT$/m)
  })
})

describe("one effect as its reader gets it", () => {
  it("a row whose stored payload could not be read says so and why, not just null", () => {
    const row = {
      sequence: 1,
      effectId: "o-1:welcome",
      commandId: "o-1",
      aggregateType: "account",
      aggregateId: "acc-1",
      kind: "email.send",
      payload: null,
      lane: "acc-1",
      status: "failed" as const,
      attempts: 1,
      availableAt: 0,
      leaseOwner: null,
      leaseExpiresAt: null,
      response: null,
      error: null,
      createdAt: 0,
      updatedAt: 0,
      quarantine: null
    }
    assert.match(
      renderEffect({ ...row, undecodable: "its stored payload is not JSON (cut off)" }),
      /payload\s+unreadable: its stored payload is not JSON \(cut off\)/
    )
    assert.match(renderEffect(row), /payload\s+-\n/)
  })

  it("a row whose stored quarantine record could not be read says so and why", () => {
    const row = {
      sequence: 1,
      effectId: "o-1:welcome",
      commandId: "o-1",
      aggregateType: "account",
      aggregateId: "acc-1",
      kind: "email.send",
      payload: {},
      lane: "acc-1",
      status: "quarantined" as const,
      attempts: 1,
      availableAt: 0,
      leaseOwner: null,
      leaseExpiresAt: null,
      response: null,
      error: null,
      createdAt: 0,
      updatedAt: 0,
      quarantine: null,
      quarantineUnreadable: "its stored quarantine record is not JSON (cut off)"
    }
    assert.match(renderEffect(row), /quarantine\s+unreadable: its stored quarantine record is not JSON \(cut off\)/)
  })
})

describe("a thread's damaged rows as its reader gets them", () => {
  it("an approval whose stored arguments could not be read says so and why in its arguments column", () => {
    const text = renderApprovals({
      approvals: [
        {
          threadId: "t1",
          turnId: "t1:m1",
          callId: "call_1_0",
          name: "execute",
          arguments: null,
          undecodable: "its stored argument text is not JSON (cut off)",
          effectId: "tool:t1:m1:call_1_0",
          deadline: 0
        }
      ]
    })
    assert.match(text, /call_1_0\s+execute\s+unreadable: its stored argument text/)
  })

  it("a transcript with an unreadable message is invalid and names its position and why", () => {
    const unreadableMessages = [{ position: 2, why: "its stored message is not JSON (cut off)" }]
    const text = renderThread({
      thread: { threadId: "t1", title: "", status: "idle", turns: [], messages: [], unreadableMessages },
      transcript: { messages: [{ role: "user", content: "hi" }], valid: false, problems: [], unreadableMessages },
      effects: []
    })
    assert.match(
      text,
      /transcript\s+INVALID \(1 messages\): message 2 unreadable: its stored message is not JSON \(cut off\)/
    )
  })
})
