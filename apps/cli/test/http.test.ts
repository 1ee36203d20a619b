import { assert, describe, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import Database from "better-sqlite3"
import { createServer } from "node:net"
import * as Http from "node:http"
import { HttpServerResponse } from "@effect/platform"
import { ListenerGate } from "@orchestration/server"
import { join } from "node:path"
import {
  cli,
  effectStatus,
  exitOf,
  scriptedTurn,
  send,
  serverLayer,
  serve,
  start,
  stop,
  tempDir,
  TestServer,
  threadStatus,
  waitForOutput,
  waitUntil
} from "./fixtures/processes.js"

const finished = (url: string, threadId: string) =>
  waitUntil(
    `thread ${threadId} to finish its turns`,
    Effect.map(threadStatus(url, threadId), (t) =>
      t.status === "idle" &&
      t.turns.length > 0 &&
      t.turns.every((turn) => turn.status !== "running" && turn.status !== "queued")
        ? t
        : undefined
    )
  )

/** A port nothing listens on: bound once by the OS, then released. */
const closedPort = Effect.promise(
  () =>
    new Promise<number>((resolve) => {
      const server = createServer()
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        const port = typeof address === "object" && address !== null ? address.port : 0
        server.close(() => resolve(port))
      })
    })
)

/** A server on a chosen port (to come back on the same URL after a restart). */
const serveOn = (dataDir: string, port: number) => serve(dataDir, { PORT: String(port) }, port)

layer(serverLayer(), { excludeTestServices: true, timeout: 60_000 })("the CLI against a running server", (it) => {
  it.effect("status shows health, store, engine, outbox and reactors as a table; --json gives the report", () =>
    Effect.gen(function* () {
      const { url } = yield* TestServer
      const text = yield* cli(["status", "--url", url])
      assert.strictEqual(text.code, 0, text.stderr)
      assert.match(text.stdout, /^server\s+http:\/\/127\.0\.0\.1:\d+$/m)
      assert.match(text.stdout, /^status\s+(ok|degraded)$/m)
      assert.match(text.stdout, /^engine\s+active, log head \d+, queue \d+$/m)
      assert.match(text.stdout, /^store\s+writable, free .+, floor 64\.0 MiB$/m)
      assert.match(
        text.stdout,
        /^database\s+sqlite, answers in \d+ ms, takes writes, node cli-test, 1 live worker\(s\)$/m
      )
      assert.match(text.stdout, /^outbox\s+\d+ pending, \d+ running, \d+ failed, \d+ quarantined$/m)
      assert.match(text.stdout, /^REACTOR\s+LAG\s+OLDEST PENDING$/m)
      assert.match(text.stdout, /^agents\s+\d+\s+/m)
      const json = yield* cli(["status", "--url", url, "--json"])
      assert.strictEqual(json.code, 0)
      const report = JSON.parse(json.stdout)
      for (const key of ["status", "storage", "engine", "database", "outbox", "reactors"]) assert.property(report, key)
      assert.strictEqual(report.engine.active, true)
      assert.deepStrictEqual(
        report.reactors.map((r: { name: string }) => r.name),
        ["agents"]
      )
    })
  )

  it.effect("effects list shows the outbox and filters by status, kind and thread; effects show shows one row", () =>
    Effect.gen(function* () {
      const { url } = yield* TestServer
      yield* send(
        url,
        scriptedTurn("c-list", "t-list", "m1", [
          { toolCalls: [{ name: "publish", arguments: { path: "list.md", content: "x" } }] },
          { text: "ok" }
        ])
      )
      yield* finished(url, "t-list")
      const table = yield* cli(["effects", "list", "--url", url, "--thread", "t-list"])
      assert.strictEqual(table.code, 0, table.stderr)
      const lines = table.stdout.trim().split("\n")
      assert.match(lines[0]!, /^EFFECT\s+KIND\s+STATUS\s+ATTEMPTS\s+AGGREGATE\s+UPDATED$/)
      assert.deepStrictEqual(
        lines.slice(1).map((l) => l.split(/\s+/).slice(0, 5)),
        [
          ["step:t-list:m1#1", "model.step", "succeeded", "1", "thread/t-list"],
          ["tool:t-list:m1:call_1_0", "tool.publish", "succeeded", "1", "thread/t-list"],
          ["step:t-list:m1#2", "model.step", "succeeded", "1", "thread/t-list"]
        ]
      )
      const byKind = yield* cli([
        "effects",
        "list",
        "--url",
        url,
        "--thread",
        "t-list",
        "--kind",
        "tool.publish",
        "--status",
        "succeeded",
        "--json"
      ])
      assert.strictEqual(byKind.code, 0)
      assert.deepStrictEqual(
        JSON.parse(byKind.stdout).effects.map((e: { effectId: string }) => e.effectId),
        ["tool:t-list:m1:call_1_0"]
      )
      const none = yield* cli(["effects", "list", "--url", url, "--thread", "t-list", "--status", "failed"])
      assert.strictEqual(none.stdout.trim(), "no effects")

      const shown = yield* cli(["effects", "show", "tool:t-list:m1:call_1_0", "--url", url])
      assert.strictEqual(shown.code, 0, shown.stderr)
      assert.match(shown.stdout, /^effect\s+tool:t-list:m1:call_1_0$/m)
      assert.match(shown.stdout, /^status\s+succeeded$/m)
      assert.match(shown.stdout, /^attempts\s+1$/m)
      assert.match(shown.stdout, /^decided by\s+outcome:step:t-list:m1#1#1$/m)
      assert.match(shown.stdout, /^payload\s+.*"path":"list.md"/m)
      const json = yield* cli(["effects", "show", "tool:t-list:m1:call_1_0", "--url", url, "--json"])
      assert.strictEqual(JSON.parse(json.stdout).status, "succeeded")

      const unknown = yield* cli(["effects", "show", "nope", "--url", url])
      assert.strictEqual(unknown.code, 5)
      assert.include(unknown.stderr, "no effect 'nope'")
      const badStatus = yield* cli(["effects", "list", "--url", url, "--status", "lost"])
      assert.strictEqual(badStatus.code, 2)
    })
  )

  it.effect(
    "cancel and retry are operator commands with receipts: a repeat is a duplicate, a refused one exits 7 and is not stored, a reused id 7",
    () =>
      Effect.gen(function* () {
        const { url } = yield* TestServer
        // The publish waits in the thread's lane behind the running execute: pending, so cancellable.
        yield* send(
          url,
          scriptedTurn("c-op", "t-op", "m1", [
            {
              toolCalls: [
                { name: "execute", arguments: { command: "sleep 15" } },
                { name: "publish", arguments: { path: "op.md", content: "x" } }
              ]
            },
            { text: "done" }
          ])
        )
        const publish = "tool:t-op:m1:call_1_1"
        yield* waitUntil(
          "the execute to run",
          Effect.map(effectStatus(url, "tool:t-op:m1:call_1_0"), (e) => (e.status === "running" ? e : undefined))
        )
        assert.strictEqual((yield* effectStatus(url, publish)).status, "pending")

        const cancelled = yield* cli(["effects", "cancel", publish, "--url", url])
        assert.strictEqual(cancelled.code, 0, cancelled.stderr)
        assert.match(cancelled.stdout, /^cancel\s+accepted$/m)
        assert.match(cancelled.stdout, /^command\s+operator:cancel:tool:t-op:m1:call_1_1#0\.0$/m)
        assert.include(
          cancelled.stdout,
          "receipt: orchestrator receipts show 'operator:cancel:tool:t-op:m1:call_1_1#0.0'"
        )
        assert.strictEqual((yield* effectStatus(url, publish)).status, "cancelled")
        const again = yield* cli(["effects", "cancel", publish, "--url", url, "--json"])
        assert.strictEqual(again.code, 0, again.stderr)
        assert.strictEqual(JSON.parse(again.stdout).duplicate, true)

        const receipt = yield* cli(["receipts", "show", "operator:cancel:tool:t-op:m1:call_1_1#0.0", "--url", url])
        assert.strictEqual(receipt.code, 0, receipt.stderr)
        assert.match(receipt.stdout, /^status\s+accepted$/m)
        assert.match(receipt.stdout, /^type\s+effect\.cancel$/m)
        assert.match(receipt.stdout, /^aggregate\s+thread\/t-op$/m)

        const retried = yield* cli(["effects", "retry", publish, "--url", url, "--command-id", "retry-op-1", "--json"])
        assert.strictEqual(retried.code, 0, retried.stderr)
        assert.strictEqual(JSON.parse(retried.stdout).commandId, "retry-op-1")
        // Back to be performed: the cancelled attempt 0 runs now as attempt 1.
        yield* waitUntil(
          "the retried publish",
          Effect.map(effectStatus(url, publish), (e) => (e.status === "succeeded" && e.attempts === 1 ? e : undefined)),
          60_000
        )

        // Retrying what is not failed or cancelled is refused (409 EffectActionRefused): exit 7.
        yield* send(url, scriptedTurn("c-op2", "t-op2", "m1", [{ text: "plain" }]))
        yield* finished(url, "t-op2")
        const refused = yield* cli(["effects", "retry", "step:t-op2:m1#1", "--url", url])
        assert.strictEqual(refused.code, 7)
        assert.include(refused.stderr, "EffectActionRefused")
        assert.include(refused.stderr, "only failed or cancelled effects can be retried")
        // An id that already names another command is a conflict (409): exit 7.
        const conflict = yield* cli(["effects", "cancel", publish, "--url", url, "--command-id", "c-op2"])
        assert.strictEqual(conflict.code, 7)
        assert.include(conflict.stderr, "CommandIdConflict")
        const unknown = yield* cli(["effects", "cancel", "nope", "--url", url])
        assert.strictEqual(unknown.code, 5)
      })
  )

  it.effect(
    "threads show lists turns and each tool call with its effect's status and attempts, and the transcript's validity",
    () =>
      Effect.gen(function* () {
        const { url } = yield* TestServer
        yield* send(
          url,
          scriptedTurn("c-thread", "t-thread", "m1", [
            {
              toolCalls: [
                { name: "publish", arguments: { path: "a.md", content: "a" } },
                { name: "publish", arguments: { path: "../escape.md", content: "b" } }
              ]
            },
            { text: "published" }
          ])
        )
        yield* finished(url, "t-thread")
        const shown = yield* cli(["threads", "show", "t-thread", "--url", url])
        assert.strictEqual(shown.code, 0, shown.stderr)
        assert.match(shown.stdout, /^thread\s+t-thread$/m)
        assert.match(shown.stdout, /^status\s+idle$/m)
        assert.match(shown.stdout, /^transcript\s+valid \(5 messages\)$/m)
        assert.match(shown.stdout, /^TURN\s+STATUS\s+STEPS\s+TOOL CALLS\s+REASON$/m)
        assert.match(shown.stdout, /^t-thread:m1\s+completed\s+2\s+2\s+-$/m)
        assert.match(shown.stdout, /^TURN\s+CALL\s+TOOL\s+EFFECT\s+STATUS\s+ATTEMPTS\s+RESULT$/m)
        assert.match(shown.stdout, /^t-thread:m1\s+call_1_0\s+publish\s+tool:t-thread:m1:call_1_0\s+succeeded\s+1\s+/m)
        assert.match(
          shown.stdout,
          /^t-thread:m1\s+call_1_1\s+publish\s+tool:t-thread:m1:call_1_1\s+failed\s+1\s+error:/m
        )
        const json = JSON.parse((yield* cli(["threads", "show", "t-thread", "--url", url, "--json"])).stdout)
        assert.strictEqual(json.transcript.valid, true)
        assert.deepStrictEqual(
          json.thread.turns[0].toolCalls.map((c: { effectId: string }) => c.effectId),
          ["tool:t-thread:m1:call_1_0", "tool:t-thread:m1:call_1_1"]
        )
        assert.deepStrictEqual(
          json.effects.map((e: { kind: string }) => e.kind),
          ["model.step", "tool.publish", "tool.publish", "model.step"]
        )
        const unknown = yield* cli(["threads", "show", "nope", "--url", url])
        assert.strictEqual(unknown.code, 5)
      })
  )

  it.effect("receipts show prints a command's receipt; an unknown id exits 5", () =>
    Effect.gen(function* () {
      const { url } = yield* TestServer
      yield* send(url, scriptedTurn("c-receipt", "t-receipt", "m1", [{ text: "hello" }]))
      const shown = yield* cli(["receipts", "show", "c-receipt", "--url", url])
      assert.strictEqual(shown.code, 0, shown.stderr)
      assert.match(shown.stdout, /^command\s+c-receipt$/m)
      assert.match(shown.stdout, /^status\s+accepted$/m)
      assert.match(shown.stdout, /^type\s+message\.send$/m)
      assert.match(shown.stdout, /^effects\s+step:t-receipt:m1#1$/m)
      // The global forms of the options, before the command, and the URL from the environment.
      const global = yield* cli(["--url", url, "--json", "receipts", "show", "c-receipt"])
      assert.strictEqual(JSON.parse(global.stdout).commandType, "message.send")
      const fromEnv = yield* cli(["receipts", "show", "c-receipt", "--json"], { ORCHESTRATOR_URL: url })
      assert.strictEqual(JSON.parse(fromEnv.stdout).commandId, "c-receipt")
      const unknown = yield* cli(["receipts", "show", "nope", "--url", url])
      assert.strictEqual(unknown.code, 5)
      assert.include(unknown.stderr, "nope")
    })
  )

  it.scoped("events tail prints one line per event, follows new ones, and ends with 0 when interrupted", () =>
    Effect.gen(function* () {
      const { url } = yield* TestServer
      yield* send(url, scriptedTurn("c-tail", "t-tail", "m1", [{ text: "first" }]))
      yield* finished(url, "t-tail")
      const tail = yield* start(["events", "tail", "--after", "0", "--url", url])
      const first = yield* waitForOutput(tail, "the thread's first events", (lines) =>
        lines.some((l) => l.includes("t-tail")) ? [...lines] : undefined
      )
      assert.match(first[0]!, /^1 {2}\d{4}-\d\d-\d\dT\S+Z {2}thread\.created {2}thread\/\S+ v1 {2}\S+$/)
      const sequences = first.map((l) => Number(l.split("  ")[0]))
      assert.deepStrictEqual(
        sequences,
        sequences.map((_, i) => i + 1)
      )
      // A command sent while it follows shows up too.
      yield* send(url, scriptedTurn("c-tail-2", "t-tail-2", "m1", [{ text: "second" }]))
      yield* waitForOutput(tail, "the followed event", (lines) =>
        lines.find((l) => / thread\.created {2}thread\/t-tail-2 v1 {2}c-tail-2$/.test(l))
      )
      tail.child.kill("SIGINT")
      assert.strictEqual((yield* exitOf(tail)).code, 0)

      const json = yield* start(["events", "tail", "--after", "2", "--url", url, "--json"])
      const events = yield* waitForOutput(json, "JSON lines", (lines) =>
        lines.length >= 2 ? lines.slice(0, 2).map((l) => JSON.parse(l)) : undefined
      )
      assert.deepStrictEqual(
        events.map((e) => e.sequence),
        [3, 4]
      )
      assert.deepStrictEqual(Object.keys(events[0]).sort(), [
        "aggregateId",
        "aggregateType",
        "commandId",
        "eventId",
        "occurredAt",
        "payload",
        "sequence",
        "type",
        "version"
      ])
      json.child.kill("SIGTERM")
      assert.strictEqual((yield* exitOf(json)).code, 0)

      // Without --after it starts at the head: only what happens from now on.
      yield* finished(url, "t-tail-2")
      const fresh = yield* start(["events", "tail", "--url", url])
      const head = yield* waitUntil(
        "the tail to say where it starts",
        Effect.sync(() => {
          const match = /following the event log after (\d+)/.exec(fresh.stderr.join(""))
          return match === null ? undefined : Number(match[1])
        })
      )
      yield* send(url, scriptedTurn("c-tail-3", "t-tail-3", "m1", [{ text: "third" }]))
      const newOnly = yield* waitForOutput(fresh, "the new command's events", (lines) =>
        lines.some((l) => l.endsWith("thread.created  thread/t-tail-3 v1  c-tail-3")) ? [...lines] : undefined
      )
      const fromHead = newOnly.map((l) => Number(l.split("  ")[0]))
      assert.deepStrictEqual(
        fromHead,
        fromHead.map((_, i) => head + 1 + i)
      )
      fresh.child.kill("SIGINT")
      assert.strictEqual((yield* exitOf(fresh)).code, 0)
    })
  )
})

describe("the CLI with servers of its own", () => {
  it.scopedLive(
    "events tail survives a server restart: it reconnects after the last event it printed, nothing twice, nothing lost",
    () =>
      Effect.gen(function* () {
        const dataDir = tempDir()
        const port = yield* closedPort
        const first = yield* serveOn(dataDir, port)
        yield* send(first.url, scriptedTurn("c-r1", "t-r1", "m1", [{ text: "one" }]))
        const tail = yield* start(["events", "tail", "--after", "0", "--json", "--url", first.url])
        yield* waitForOutput(tail, "the first turn's events", (lines) =>
          lines.some((l) => l.includes("turn.completed")) ? true : undefined
        )
        assert.strictEqual((yield* stop(first)).code, 0)
        const second = yield* serveOn(dataDir, port)
        yield* send(second.url, scriptedTurn("c-r2", "t-r2", "m1", [{ text: "two" }]))
        const lines = yield* waitForOutput(tail, "the second turn's events after the restart", (lines) =>
          lines.some((l) => l.includes('"commandId":"c-r2"')) &&
          lines.some((l) => l.includes("turn.completed") && l.includes("t-r2"))
            ? [...lines]
            : undefined
        )
        const sequences = lines.map((l) => (JSON.parse(l) as { sequence: number }).sequence)
        assert.deepStrictEqual(
          sequences,
          sequences.map((_, i) => i + 1)
        )
        assert.include(tail.stderr.join(""), "the event stream ended after")
        tail.child.kill("SIGINT")
        assert.strictEqual((yield* exitOf(tail)).code, 0)
      }),
    120_000
  )

  it.scopedLive(
    "a quarantined effect: status counts it, effects list and show name it, release refuses while the cause remains, fail ends it",
    () =>
      Effect.gen(function* () {
        const dataDir = tempDir()
        const first = yield* serve(dataDir)
        yield* send(first.url, scriptedTurn("c-q1", "t-q", "m1", [{ text: "done" }]))
        yield* finished(first.url, "t-q")
        assert.strictEqual((yield* stop(first)).code, 0)
        // Between lives: a process that died had the model step running, and the thread's log stopped decoding.
        const db = new Database(join(dataDir, "engine.db"))
        db.prepare(
          "UPDATE outbox SET status = 'running', lease_owner = 'dead-process', lease_expires_at = 0 WHERE effect_id = 'step:t-q:m1#1'"
        ).run()
        db.prepare(`UPDATE events SET payload = '{"type":"thread.unknown"}' WHERE aggregate_id = 't-q'`).run()
        db.close()
        const second = yield* serve(dataDir)
        const status = yield* cli(["status", "--url", second.url])
        assert.strictEqual(status.code, 0, status.stderr)
        assert.match(status.stdout, /^status\s+degraded$/m)
        assert.match(status.stdout, /^outbox\s+.*, 1 QUARANTINED/m)
        const list = yield* cli(["effects", "list", "--status", "quarantined", "--url", second.url, "--json"])
        assert.deepStrictEqual(
          JSON.parse(list.stdout).effects.map((e: { effectId: string; quarantine: { reason: string } }) => [
            e.effectId,
            e.quarantine.reason
          ]),
          [["step:t-q:m1#1", "aggregate-unavailable"]]
        )
        const shown = yield* cli(["effects", "show", "step:t-q:m1#1", "--url", second.url])
        assert.match(shown.stdout, /^status\s+quarantined$/m)
        assert.match(shown.stdout, /^quarantine\s+aggregate-unavailable \(by reconcile at /m)
        const release = yield* cli(["effects", "release", "step:t-q:m1#1", "--url", second.url])
        assert.strictEqual(release.code, 7, release.stdout + release.stderr)
        assert.include(release.stderr, "EffectStillQuarantined")
        const failed = yield* cli([
          "effects",
          "fail",
          "step:t-q:m1#1",
          "--reason",
          "thread log lost; answered by hand",
          "--url",
          second.url
        ])
        assert.strictEqual(failed.code, 0, failed.stderr)
        assert.match(failed.stdout, /^status\s+failed$/m)
        assert.include(failed.stdout, "thread log lost; answered by hand")
        assert.match((yield* cli(["status", "--url", second.url])).stdout, /^outbox\s+.*, 0 quarantined$/m)
        assert.strictEqual((yield* stop(second)).code, 0)
      }),
    240_000
  )

  it.scopedLive("status on a server below its disk floor prints the report and exits 1", () =>
    Effect.gen(function* () {
      const server = yield* serve(tempDir(), { DISK_FLOOR_BYTES: String(2 ** 52) })
      const result = yield* cli(["status", "--url", server.url])
      assert.strictEqual(result.code, 1, result.stderr)
      assert.match(result.stdout, /^status\s+unavailable$/m)
      assert.match(result.stdout, /^store\s+.*\(BELOW THE FLOOR\)$/m)
      assert.strictEqual(result.stderr, "")
    })
  )

  it.live(
    "an unreachable server is exit 3 with the URL named, for every server command",
    () =>
      Effect.gen(function* () {
        const url = `http://127.0.0.1:${yield* closedPort}`
        for (const args of [
          ["status"],
          ["effects", "list"],
          ["effects", "retry", "x"],
          ["threads", "show", "t"],
          ["receipts", "show", "c"],
          ["events", "tail", "--after", "0"]
        ]) {
          const result = yield* cli([...args, "--url", url])
          assert.strictEqual(result.code, 3, `${args.join(" ")}: ${result.stderr}`)
          assert.include(result.stderr, `cannot reach the server at ${url}: is it running? (ECONNREFUSED)`)
        }
      }),
    120_000
  )

  it.live(
    "usage errors exit 2; --help on every command exits 0 and describes it",
    () =>
      Effect.gen(function* () {
        const helps = [
          [],
          ["serve"],
          ["status"],
          ["effects"],
          ["effects", "list"],
          ["effects", "show"],
          ["effects", "retry"],
          ["effects", "cancel"],
          ["events", "tail"],
          ["threads", "show"],
          ["receipts", "show"],
          ["db"],
          ["db", "check"],
          ["db", "backup"]
        ]
        const results = yield* Effect.forEach(helps, (path) => cli([...path, "--help"]), { concurrency: 3 })
        results.forEach((result, i) => {
          assert.strictEqual(result.code, 0, `${helps[i]!.join(" ")} --help: ${result.stderr}`)
          assert.include(result.stdout, "USAGE")
          assert.include(result.stdout, "DESCRIPTION")
        })
        assert.include(results[4]!.stdout, "--thread")
        assert.include(results[12]!.stdout, "--data-dir")
        const unknownCommand = yield* cli(["effcts"])
        assert.strictEqual(unknownCommand.code, 2)
        const missingArgument = yield* cli(["effects", "show"])
        assert.strictEqual(missingArgument.code, 2)
        const badConfig = yield* cli(["serve"], { PORT: "eighty" })
        assert.strictEqual(badConfig.code, 2)
        assert.include(badConfig.stderr, "configuration error: PORT must be a whole number")
      }),
    180_000
  )
})

/** A real listener on a free port that answers every request with `answer(pathname)`. */
const listenerAnswering = (answer: (pathname: string) => Response) =>
  Effect.acquireRelease(
    Effect.promise(
      () =>
        new Promise<{ server: Http.Server; url: string }>((resolve) => {
          const server = Http.createServer((request, response) => {
            const answered = answer(new URL(request.url ?? "/", "http://localhost").pathname)
            void answered.text().then((body) => {
              response.writeHead(answered.status, Object.fromEntries(answered.headers.entries()))
              response.end(body)
            })
          })
          server.listen(0, "127.0.0.1", () => {
            const address = server.address()
            const port = typeof address === "object" && address !== null ? address.port : 0
            resolve({ server, url: `http://127.0.0.1:${port}` })
          })
        })
    ),
    ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
  )

/** A listener that answers every request as the server's gate does while it starts or stops (its own `closedResponse`). */
const gateOnly = (phase: "starting" | "stopping") =>
  listenerAnswering((pathname) => HttpServerResponse.toWeb(ListenerGate.closedResponse(phase, pathname)))

/** Each command against a gate-only listener: exit 1 and one line naming the gate's answer. */
const answeredByGate = (
  phase: "starting" | "stopping",
  commands: ReadonlyArray<ReadonlyArray<string>>,
  line: string,
  statusLine: (url: string) => string
) =>
  Effect.gen(function* () {
    const { url } = yield* gateOnly(phase)
    for (const args of [...commands, ["status"]]) {
      const result = yield* cli([...args, "--url", url])
      assert.strictEqual(result.code, 1, `${args.join(" ")}: ${result.stderr}`)
      const expected = args[0] === "status" ? statusLine(url) : line
      assert.strictEqual(result.stderr.trim(), `error: ${expected}`, args.join(" "))
    }
  })

describe("the CLI against a server that is not serving yet, or any more", () => {
  it.scopedLive(
    "a starting server's 503 is said as such (retry shortly), exit 1, for every server command; not a schema dump",
    () =>
      answeredByGate(
        "starting",
        [
          ["effects", "list"],
          ["effects", "show", "x"],
          ["effects", "retry", "x"],
          ["threads", "show", "t"],
          ["receipts", "show", "c"]
        ],
        "the server answered 503 Starting: the server is starting (opening, migrating or reconciling its store); retry shortly",
        (url) => `the server at ${url} is starting; retry shortly`
      ),
    120_000
  )

  it.scopedLive("a stopping server's 503 says it is shutting down, on reads as on commands", () =>
    answeredByGate(
      "stopping",
      [
        ["effects", "show", "x"],
        ["effects", "retry", "x"]
      ],
      "the server answered 503 EngineUnavailable: the server is shutting down",
      (url) => `the server at ${url} is stopping`
    )
  )
})

describe("the CLI against a server whose error it does not know", () => {
  it.scopedLive(
    "an error body this CLI cannot decode (a newer server's error, or one a route does not declare) is said by its status, tag and message",
    () =>
      Effect.gen(function* () {
        const json = (status: number, body: unknown) =>
          new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } })
        const { url } = yield* listenerAnswering((pathname) =>
          pathname.startsWith("/v1/receipts") || pathname.startsWith("/v1/commands/")
            ? json(500, { error: "SomethingNew", message: "a newer server's failure" })
            : json(409, { error: "EffectLocked", message: "a newer server's refusal" })
        )
        const conflict = yield* cli(["effects", "show", "x", "--url", url])
        assert.strictEqual(conflict.stderr.trim(), "error: EffectLocked: a newer server's refusal")
        assert.strictEqual(conflict.code, 7)
        const failed = yield* cli(["receipts", "show", "c", "--url", url])
        assert.strictEqual(
          failed.stderr.trim(),
          "error: the server answered 500 SomethingNew: a newer server's failure"
        )
        assert.strictEqual(failed.code, 1)
      }),
    60_000
  )

  it.scopedLive(
    "a /health answer that is not a report is said by its status, tag and message, each clipped as any error answer's",
    () =>
      Effect.gen(function* () {
        const { url } = yield* listenerAnswering(
          () =>
            new Response(JSON.stringify({ error: "T".repeat(5_000), message: "m".repeat(50_000) }), {
              status: 500,
              headers: { "content-type": "application/json" }
            })
        )
        const result = yield* cli(["status", "--url", url])
        assert.strictEqual(
          result.stderr.trim(),
          `error: the server answered 500 ${"T".repeat(100)}: ${"m".repeat(500)}`
        )
        assert.strictEqual(result.code, 1)
      }),
    60_000
  )
})
