import { assert, describe, it, layer } from "@effect/vitest"
import Database from "better-sqlite3"
import { Context, Effect, Layer } from "effect"
import { appendFileSync, copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import {
  cli,
  effectStatus,
  exitOf,
  scriptedTurn,
  send,
  serve,
  stop,
  tempDir,
  threadStatus,
  waitUntil
} from "./fixtures/processes.js"

/**
 * A store written by the real server: turns with tool calls that succeed and fail, an operator's
 * cancel, a user's interrupt (the aggregate cancels a pending call itself), and a SIGKILL in the
 * middle of an execute followed by a restart (boot reconcile settles it). Then the server stops.
 */
class Golden extends Context.Tag("cli-test/Golden")<Golden, { readonly dataDir: string; readonly file: string }>() {}

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

const effectIs = (url: string, effectId: string, status: string) =>
  waitUntil(
    `${effectId} to be ${status}`,
    Effect.map(effectStatus(url, effectId), (e) => (e.status === status ? e : undefined))
  )

const buildGolden = Effect.gen(function* () {
  const dataDir = tempDir("cli-golden-")
  const first = yield* serve(dataDir)
  const url = first.url
  // A publish that succeeds, one that fails (a path outside the world), and an answer.
  yield* send(
    url,
    scriptedTurn("c-ok", "t-ok", "m1", [
      {
        toolCalls: [
          { name: "publish", arguments: { path: "hello.md", content: "hi" } },
          { name: "publish", arguments: { path: "../out.md", content: "no" } }
        ]
      },
      { text: "published" }
    ])
  )
  yield* finished(url, "t-ok")
  // An operator cancels a call waiting behind a running execute.
  yield* send(
    url,
    scriptedTurn("c-cancel", "t-cancel", "m1", [
      {
        toolCalls: [
          { name: "execute", arguments: { command: "sleep 3" } },
          { name: "publish", arguments: { path: "c.md", content: "c" } }
        ]
      },
      { text: "after cancel" }
    ])
  )
  yield* effectIs(url, "tool:t-cancel:m1:call_1_0", "running")
  const cancel = yield* Effect.promise(() =>
    fetch(`${url}/v1/effects/${encodeURIComponent("tool:t-cancel:m1:call_1_1")}/cancel`, {
      method: "POST",
      headers: { "content-type": "application/json" }
    })
  )
  assert.strictEqual(cancel.status, 200)
  yield* finished(url, "t-cancel")
  // The user interrupts: the turn cancels its pending call and stops its running execute (both cancelled).
  yield* send(
    url,
    scriptedTurn("c-stop", "t-stop", "m1", [
      {
        toolCalls: [
          { name: "execute", arguments: { command: "sleep 3" } },
          { name: "publish", arguments: { path: "s.md", content: "s" } }
        ]
      }
    ])
  )
  yield* effectIs(url, "tool:t-stop:m1:call_1_0", "running")
  yield* send(url, { commandId: "stop-1", type: "turn.interrupt", threadId: "t-stop", turnId: "t-stop:m1" })
  yield* effectIs(url, "tool:t-stop:m1:call_1_1", "cancelled")
  yield* effectIs(url, "tool:t-stop:m1:call_1_0", "cancelled")
  // SIGKILL mid-execute; after the restart boot reconcile answers the call and the turn goes on.
  yield* send(
    url,
    scriptedTurn("c-kill", "t-kill", "m1", [
      { toolCalls: [{ name: "execute", arguments: { command: "sleep 60" } }] },
      { text: "after restart" }
    ])
  )
  yield* effectIs(url, "tool:t-kill:m1:call_1_0", "running")
  // Killed once the execute has started (its ledger line is written), not between claim and start.
  yield* waitUntil(
    "the execute to start",
    Effect.sync(() => {
      const ledger = join(dataDir, "world", "ledger.jsonl")
      return existsSync(ledger) && readFileSync(ledger, "utf8").includes('"tool:t-kill:m1:call_1_0"') ? true : undefined
    })
  )
  first.process.child.kill("SIGKILL")
  yield* exitOf(first.process)
  const second = yield* serve(dataDir)
  yield* finished(second.url, "t-kill")
  assert.strictEqual((yield* stop(second)).code, 0)
  return { dataDir, file: join(dataDir, "engine.db") }
})

/** A copy of the golden store in a fresh directory, changed by `plant` (raw SQL, as a bug would). */
const plantedCopy = (file: string, plant: (db: Database.Database) => void) => {
  const dir = tempDir("cli-planted-")
  const copy = join(dir, "engine.db")
  copyFileSync(file, copy)
  const db = new Database(copy)
  try {
    plant(db)
  } finally {
    db.close()
  }
  return copy
}

const checkJson = (file: string) =>
  Effect.map(cli(["db", "check", "--db", file, "--json"]), (result) => ({
    code: result.code,
    report: JSON.parse(result.stdout) as {
      ok: boolean
      counts: Record<string, number>
      problems: Array<{ check: string; subject: string; message: string }>
    }
  }))

const checksOf = (problems: ReadonlyArray<{ check: string; subject: string }>) =>
  problems.map((p) => `${p.check} ${p.subject}`)

layer(Layer.scoped(Golden, buildGolden), { excludeTestServices: true, timeout: 180_000 })(
  "db check and db backup on a store the server wrote",
  (it) => {
    it.effect("the store passes db check: exit 0, a readable report", () =>
      Effect.gen(function* () {
        const { dataDir, file } = yield* Golden
        const before = readFileSync(file)
        const text = yield* cli(["db", "check", "--data-dir", dataDir])
        assert.strictEqual(text.code, 0, text.stdout + text.stderr)
        // The check writes nothing to the store.
        assert.isTrue(readFileSync(file).equals(before))
        assert.include(text.stdout, `db check ${file}`)
        assert.match(text.stdout, /^events\s+\d+ \(log head \d+, 4 aggregates\)$/m)
        assert.match(text.stdout, /^transcripts\s+4$/m)
        assert.include(text.stdout, "ok: no problems found")
        const { code, report } = yield* checkJson(file)
        assert.strictEqual(code, 0)
        assert.isTrue(report.ok)
        assert.deepStrictEqual(report.problems, [])
        assert.strictEqual(report.counts.head, report.counts.events)
        // Every way a row gets settled is in it: succeeded, failed, cancelled by an operator and by the aggregate, reconciled.
        const db = new Database(file, { readonly: true })
        const ids = (db.prepare("SELECT command_id FROM receipts").all() as Array<{ command_id: string }>).map(
          (r) => r.command_id
        )
        const statuses = (
          db.prepare("SELECT DISTINCT status FROM outbox ORDER BY status").all() as Array<{ status: string }>
        ).map((r) => r.status)
        db.close()
        assert.deepStrictEqual(statuses, ["cancelled", "failed", "succeeded"])
        assert.include(ids, "operator:cancel:tool:t-cancel:m1:call_1_1#0.0")
        assert.include(ids, "reconcile:tool:t-kill:m1:call_1_0#1")
        assert.include(ids, "stop-1")
      })
    )

    it.scoped("while a server runs on the store, db check and db backup exit 6 and say so", () =>
      Effect.gen(function* () {
        const { file } = yield* Golden
        const dir = tempDir("cli-busy-")
        copyFileSync(file, join(dir, "engine.db"))
        const server = yield* serve(dir)
        const check = yield* cli(["db", "check", "--data-dir", dir])
        assert.strictEqual(check.code, 6)
        assert.include(check.stderr, "the server is running on this store")
        assert.include(check.stderr, "stop it first")
        const backup = yield* cli(["db", "backup", join(dir, "copy.db"), "--data-dir", dir])
        assert.strictEqual(backup.code, 6)
        assert.isFalse(existsSync(join(dir, "copy.db")))
        assert.strictEqual((yield* stop(server)).code, 0)
        assert.strictEqual((yield* cli(["db", "check", "--data-dir", dir])).code, 0)
      })
    )

    it.effect("a deleted event is a sequence gap (and its receipt and aggregate say so too)", () =>
      Effect.gen(function* () {
        const { file } = yield* Golden
        const copy = plantedCopy(file, (db) => db.prepare("DELETE FROM events WHERE sequence = 3").run())
        const { code, report } = yield* checkJson(copy)
        assert.strictEqual(code, 1)
        const found = checksOf(report.problems)
        assert.include(found, "event-sequence-gap event 3")
        assert.isTrue(
          found.some((f) => f.startsWith("receipt-events-missing ")),
          found.join("\n")
        )
        assert.include(found, "aggregate-version-gap aggregate thread/t-ok")
        const text = yield* cli(["db", "check", "--db", copy])
        assert.strictEqual(text.code, 1)
        assert.match(text.stdout, /^\d+ problem\(s\) found$/m)
        assert.match(text.stdout, /^CHECK\s+SUBJECT\s+PROBLEM$/m)
        assert.match(text.stdout, /^event-sequence-gap\s+event 3\s+sequence 3 is missing from the event log$/m)
      })
    )

    it.effect("newest events deleted are found from the sequence head", () =>
      Effect.gen(function* () {
        const { file } = yield* Golden
        const copy = plantedCopy(file, (db) =>
          db.prepare("DELETE FROM events WHERE sequence = (SELECT MAX(sequence) FROM events)").run()
        )
        const { code, report } = yield* checkJson(copy)
        assert.strictEqual(code, 1)
        assert.isTrue(
          report.problems.some(
            (p) => p.check === "event-sequence-gap" && p.message.includes("missing from the event log")
          )
        )
      })
    )

    it.effect("a settled effect whose settlement receipt is gone: its owner never heard the outcome", () =>
      Effect.gen(function* () {
        const { file } = yield* Golden
        const succeeded = plantedCopy(file, (db) =>
          db.prepare("DELETE FROM receipts WHERE command_id = 'outcome:tool:t-ok:m1:call_1_0#1'").run()
        )
        const a = yield* checkJson(succeeded)
        assert.strictEqual(a.code, 1)
        const unheard = a.report.problems.filter((p) => p.check === "settlement-unheard")
        assert.deepStrictEqual(
          unheard.map((p) => p.subject),
          ["effect tool:t-ok:m1:call_1_0"]
        )
        assert.include(unheard[0]!.message, "succeeded at attempt 1")
        assert.include(unheard[0]!.message, "outcome:tool:t-ok:m1:call_1_0#1")
        // The failed one settled by boot reconcile, and the operator's cancel: the same finding.
        const reconciled = plantedCopy(file, (db) =>
          db.prepare("DELETE FROM receipts WHERE command_id = 'reconcile:tool:t-kill:m1:call_1_0#1'").run()
        )
        assert.include(
          checksOf((yield* checkJson(reconciled)).report.problems),
          "settlement-unheard effect tool:t-kill:m1:call_1_0"
        )
        const cancelled = plantedCopy(file, (db) =>
          db.prepare("DELETE FROM receipts WHERE command_id = 'operator:cancel:tool:t-cancel:m1:call_1_1#0.0'").run()
        )
        assert.include(
          checksOf((yield* checkJson(cancelled)).report.problems),
          "settlement-unheard effect tool:t-cancel:m1:call_1_1"
        )
        // A row marked settled behind the engine's back (no command at all) is found the same way.
        const forged = plantedCopy(file, (db) =>
          db
            .prepare(
              "UPDATE outbox SET status = 'succeeded', updated_at = updated_at + 1 WHERE effect_id = 'tool:t-ok:m1:call_1_1'"
            )
            .run()
        )
        assert.include(
          checksOf((yield* checkJson(forged)).report.problems),
          "settlement-unheard effect tool:t-ok:m1:call_1_1"
        )
      })
    )

    it.effect(
      "a process-bound effect with two ledger entries was performed twice: found in the world next to the store, or in --world-dir",
      () =>
        Effect.gen(function* () {
          const { dataDir, file } = yield* Golden
          const ledger = readFileSync(join(dataDir, "world", "ledger.jsonl"), "utf8")
          const entries = ledger
            .trim()
            .split("\n")
            .map((line) => JSON.parse(line) as { effectId: string; kind: string; attempt: number; at: string })
          const killed = entries.find((e) => e.effectId === "tool:t-kill:m1:call_1_0")!
          const published = entries.find((e) => e.effectId === "tool:t-ok:m1:call_1_0")!
          assert.strictEqual(killed.kind, "tool.execute")
          // The golden store's world holds each process-bound effect once.
          assert.strictEqual((yield* checkJson(file)).code, 0)
          // As an operator retry of the reconciled execute would have left it: a second performance.
          const twice = `${JSON.stringify({ ...killed, attempt: 2 })}\n${JSON.stringify({ ...published, attempt: 2 })}\n`
          const dir = tempDir("cli-ledger-")
          copyFileSync(file, join(dir, "engine.db"))
          mkdirSync(join(dir, "world"))
          writeFileSync(join(dir, "world", "ledger.jsonl"), ledger + twice)
          const { code, report } = yield* checkJson(join(dir, "engine.db"))
          assert.strictEqual(code, 1)
          // A replay-safe publish performed twice is what its policy allows; the execute is not.
          const repeated = report.problems.filter((p) => p.check === "ledger-repeated")
          assert.deepStrictEqual(
            repeated.map((p) => p.subject),
            ["effect tool:t-kill:m1:call_1_0"]
          )
          assert.include(repeated[0]!.message, "2 ledger entries")
          assert.include(repeated[0]!.message, "tool.execute")
          // The world given explicitly (a server run with WORLD_DIR).
          const bare = tempDir("cli-ledger-bare-")
          copyFileSync(file, join(bare, "engine.db"))
          const world = join(tempDir("cli-world-"), "w")
          mkdirSync(world)
          writeFileSync(join(world, "ledger.jsonl"), ledger)
          appendFileSync(join(world, "ledger.jsonl"), twice)
          const given = yield* cli(["db", "check", "--db", join(bare, "engine.db"), "--world-dir", world])
          assert.strictEqual(given.code, 1, given.stdout + given.stderr)
          assert.match(given.stdout, /^ledger-repeated\s+effect tool:t-kill:m1:call_1_0\s+/m)
          assert.include(given.stdout, `${world} (`)
          // The same world named by WORLD_DIR, as the server reads it (Config.storePlaces).
          const fromEnv = yield* cli(["db", "check", "--db", join(bare, "engine.db")], { WORLD_DIR: world })
          assert.strictEqual(fromEnv.code, 1, fromEnv.stdout + fromEnv.stderr)
          assert.include(fromEnv.stdout, `${world} (`)
        })
    )

    it.effect("an accepted receipt whose events are missing is named", () =>
      Effect.gen(function* () {
        const { file } = yield* Golden
        const copy = plantedCopy(file, (db) => db.prepare("DELETE FROM events WHERE command_id = 'c-cancel'").run())
        const { code, report } = yield* checkJson(copy)
        assert.strictEqual(code, 1)
        const missing = report.problems.filter((p) => p.check === "receipt-events-missing")
        assert.deepStrictEqual(
          missing.map((p) => p.subject),
          ["receipt c-cancel"]
        )
        assert.include(missing[0]!.message, "the log holds 0 of its")
      })
    )

    it.effect(
      "rows referencing missing rows: an event without its receipt, a receipt's effect without its outbox row",
      () =>
        Effect.gen(function* () {
          const { file } = yield* Golden
          const noReceipt = plantedCopy(file, (db) =>
            db.prepare("DELETE FROM receipts WHERE command_id = 'stop-1'").run()
          )
          assert.include(
            checksOf((yield* checkJson(noReceipt)).report.problems),
            "event-without-receipt command stop-1"
          )
          const noRow = plantedCopy(file, (db) =>
            db.prepare("DELETE FROM outbox WHERE effect_id = 'step:t-ok:m1#1'").run()
          )
          const { code, report } = yield* checkJson(noRow)
          assert.strictEqual(code, 1)
          assert.include(checksOf(report.problems), "receipt-effect-missing receipt c-ok")
        })
    )

    it.effect("a corrupted transcript fails validateTranscript and is named by thread", () =>
      Effect.gen(function* () {
        const { file } = yield* Golden
        // The first tool result of t-ok is gone: its call is unanswered.
        const dropped = plantedCopy(file, (db) =>
          db
            .prepare(
              "DELETE FROM agent_messages WHERE thread_id = 't-ok' AND position = (SELECT MIN(position) FROM agent_messages WHERE thread_id = 't-ok' AND message LIKE '%\"role\":\"tool\"%')"
            )
            .run()
        )
        const a = yield* checkJson(dropped)
        assert.strictEqual(a.code, 1)
        const invalid = a.report.problems.filter((p) => p.check === "transcript-invalid")
        assert.isTrue(invalid.length > 0 && invalid.every((p) => p.subject === "thread t-ok"), JSON.stringify(invalid))
        assert.isTrue(
          invalid.some((p) => p.message.startsWith("unanswered-call")),
          JSON.stringify(invalid)
        )
        // A result pointing at a call that does not exist: the provider's "No tool call found".
        const orphan = plantedCopy(file, (db) =>
          db
            .prepare(
              "UPDATE agent_messages SET message = json_set(message, '$.tool_call_id', 'call_nope') WHERE thread_id = 't-cancel' AND message LIKE '%\"role\":\"tool\"%'"
            )
            .run()
        )
        const b = yield* checkJson(orphan)
        assert.isTrue(
          b.report.problems.some(
            (p) =>
              p.check === "transcript-invalid" &&
              p.subject === "thread t-cancel" &&
              p.message.includes("No tool call found")
          )
        )
        const garbage = plantedCopy(file, (db) =>
          db
            .prepare(
              "UPDATE agent_messages SET message = '{\"role\":\"robot\"}' WHERE thread_id = 't-stop' AND position = 1"
            )
            .run()
        )
        assert.include(checksOf((yield* checkJson(garbage)).report.problems), "transcript-unreadable thread t-stop")
      })
    )

    it.effect(
      "db backup writes a copy that opens and passes db check; it draws progress and never overwrites unasked",
      () =>
        Effect.gen(function* () {
          const { dataDir, file } = yield* Golden
          const target = join(tempDir("cli-backup-"), "backup.db")
          const backup = yield* cli(["db", "backup", target, "--data-dir", dataDir, "--progress"])
          assert.strictEqual(backup.code, 0, backup.stderr)
          assert.match(backup.stdout, /^backed up .*engine\.db to .*backup\.db: \d+ pages, .+ in .+$/m)
          assert.match(backup.stderr, /backing up \[#{30}\] 100% (\d+)\/\1 pages/)
          const original = yield* checkJson(file)
          const copy = yield* checkJson(target)
          assert.strictEqual(copy.code, 0)
          assert.deepStrictEqual({ ...copy.report.counts }, { ...original.report.counts })
          const again = yield* cli(["db", "backup", target, "--data-dir", dataDir])
          assert.strictEqual(again.code, 2)
          assert.include(again.stderr, "exists")
          assert.strictEqual((yield* cli(["db", "backup", target, "--data-dir", dataDir, "--force"])).code, 0)
          const progress = yield* cli(["db", "check", "--db", target, "--progress"])
          assert.strictEqual(progress.code, 0)
          assert.match(progress.stderr, /checking \[#{30}\] 100% (\d+)\/\1 rows/)
        })
    )
  }
)

describe("db commands on files that are not a store", () => {
  it.live(
    "a missing file exits 5; a file that is not an engine store exits 1",
    () =>
      Effect.gen(function* () {
        const dir = tempDir("cli-nostore-")
        const missing = yield* cli(["db", "check", "--data-dir", dir])
        assert.strictEqual(missing.code, 5)
        assert.include(missing.stderr, `no database at ${join(dir, "engine.db")}`)
        const other = join(dir, "other.db")
        const db = new Database(other)
        db.exec("CREATE TABLE t (x)")
        db.close()
        const notStore = yield* cli(["db", "check", "--db", other])
        assert.strictEqual(notStore.code, 1)
        assert.include(notStore.stderr, "is not an engine store")
        writeFileSync(
          join(dir, "garbage.db"),
          "this is not sqlite at all, just text that is long enough to look like a header...."
        )
        const garbage = yield* cli(["db", "check", "--db", join(dir, "garbage.db")])
        assert.strictEqual(garbage.code, 1)
        assert.include(garbage.stderr, "SQLITE_NOTADB")
        // A server on PostgreSQL has no file: said plainly instead of looking for ./data/engine.db.
        const postgres = yield* cli(["db", "check"], { DATABASE_URL: "postgres://localhost/db" })
        assert.strictEqual(postgres.code, 2)
        assert.include(postgres.stderr, "DATABASE_URL points at PostgreSQL")
      }),
    60_000
  )
})
