import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { SqlClient } from "@effect/sql/SqlClient"
import { SqliteStore } from "../src/index.js"
import { jsonLines, runChild } from "./fixtures/child.js"
import { tempDir } from "./fixtures/harness.js"

const child = fileURLToPath(new URL("../dist/test/fixtures/reactor-child.js", import.meta.url))

const ledgerOf = (file: string): Array<{ effectId: string; attempt: number }> => {
  try {
    return readFileSync(file, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l))
  } catch {
    return [] // swallow-ok: no ledger file means nothing was performed
  }
}

const setup = () => {
  const dir = tempDir("crash-")
  return { db: join(dir, "engine.db"), ledger: join(dir, "ledger.jsonl") }
}

describe("crash tests: a real process killed with SIGKILL", () => {
  it.live(
    "killed after the command committed, before any reactor ran: after restart the effect runs exactly once",
    () =>
      Effect.gen(function* () {
        const { db, ledger } = setup()
        const killed = yield* runChild(child, [db, ledger, "submit", "j1", "work.bound"], {
          FAULT_POINTS: "dispatch.after-commit:nth=1"
        })
        assert.strictEqual(killed.signal, "SIGKILL")
        assert.deepStrictEqual(
          jsonLines(killed.stdout).filter((l) => "answer" in l),
          []
        )
        assert.deepStrictEqual(ledgerOf(ledger), [])
        const restarted = yield* runChild(child, [db, ledger, "serve", "job:j1"])
        assert.strictEqual(restarted.code, 0, restarted.stderr)
        const lines = jsonLines(restarted.stdout)
        assert.deepStrictEqual(lines[0], { reconciled: { requeued: 0, failed: 0, alreadySettled: 0, quarantined: 0 } })
        assert.strictEqual(lines[1]!.row.status, "succeeded")
        assert.strictEqual(lines[1]!.status.status, "succeeded")
        assert.deepStrictEqual(
          ledgerOf(ledger).map((l) => l.effectId),
          ["job:j1"]
        )
      })
  )

  it.live(
    "killed after the command committed with its claim (a replay-safe kind is claimed at commit), before the handler ran: requeued at restart and performed once",
    () =>
      Effect.gen(function* () {
        const { db, ledger } = setup()
        const killed = yield* runChild(child, [db, ledger, "submit", "j1", "work.safe"], {
          FAULT_POINTS: "dispatch.after-commit:nth=1"
        })
        assert.strictEqual(killed.signal, "SIGKILL")
        assert.deepStrictEqual(ledgerOf(ledger), [])
        const restarted = yield* runChild(child, [db, ledger, "serve", "job:j1"])
        assert.strictEqual(restarted.code, 0, restarted.stderr)
        const [reconciled, settled] = jsonLines(restarted.stdout)
        // The claim committed with the command: the row was running under the dead owner.
        assert.deepStrictEqual(reconciled, {
          reconciled: { requeued: 1, failed: 0, alreadySettled: 0, quarantined: 0 }
        })
        assert.strictEqual(settled!.row.status, "succeeded")
        assert.strictEqual(settled!.status.status, "succeeded")
        assert.deepStrictEqual(
          ledgerOf(ledger).map((l) => [l.effectId, l.attempt]),
          [["job:j1", 2]]
        )
      })
  )

  it.live(
    "killed after performing a replay-safe effect, before settling: it is performed again and recorded once",
    () =>
      Effect.gen(function* () {
        const { db, ledger } = setup()
        const killed = yield* runChild(child, [db, ledger, "submit", "j1", "work.safe"], {
          FAULT_POINTS: "reactor.after-perform:kind=work.safe:nth=1"
        })
        assert.strictEqual(killed.signal, "SIGKILL")
        assert.deepStrictEqual(
          ledgerOf(ledger).map((l) => [l.effectId, l.attempt]),
          [["job:j1", 1]]
        )
        const restarted = yield* runChild(child, [db, ledger, "serve", "job:j1"])
        assert.strictEqual(restarted.code, 0, restarted.stderr)
        const [reconciled, settled] = jsonLines(restarted.stdout)
        assert.deepStrictEqual(reconciled, {
          reconciled: { requeued: 1, failed: 0, alreadySettled: 0, quarantined: 0 }
        })
        assert.strictEqual(settled!.row.status, "succeeded")
        assert.strictEqual(settled!.row.attempts, 2)
        assert.deepStrictEqual(
          ledgerOf(ledger).map((l) => [l.effectId, l.attempt]),
          [
            ["job:j1", 1],
            ["job:j1", 2]
          ]
        )
        assert.strictEqual(settled!.status.status, "succeeded")
      })
  )

  it.live(
    "killed after performing a process-bound effect, before settling: not performed again, failed with the stored reason",
    () =>
      Effect.gen(function* () {
        const { db, ledger } = setup()
        const killed = yield* runChild(child, [db, ledger, "submit", "j1", "work.bound"], {
          FAULT_POINTS: "reactor.after-perform:kind=work.bound:nth=1"
        })
        assert.strictEqual(killed.signal, "SIGKILL")
        const restarted = yield* runChild(child, [db, ledger, "serve", "job:j1"])
        assert.strictEqual(restarted.code, 0, restarted.stderr)
        const [reconciled, settled] = jsonLines(restarted.stdout)
        assert.deepStrictEqual(reconciled, {
          reconciled: { requeued: 0, failed: 1, alreadySettled: 0, quarantined: 0 }
        })
        assert.strictEqual(settled!.row.status, "failed")
        assert.deepStrictEqual(settled!.row.error, {
          message: "server process ended before the effect completed",
          code: "process-ended",
          reason: "process-lost"
        })
        // The aggregate was told: its read model shows the failure and the reason.
        assert.deepStrictEqual(settled!.status, {
          status: "failed",
          detail: "server process ended before the effect completed"
        })
        assert.deepStrictEqual(
          ledgerOf(ledger).map((l) => [l.effectId, l.attempt]),
          [["job:j1", 1]]
        )
      })
  )

  it.live("killed mid-reconcile: the next boot finishes reconcile without settling anything twice", () =>
    Effect.gen(function* () {
      const { db, ledger } = setup()
      yield* runChild(child, [db, ledger, "submit", "a", "work.bound"], { FAULT_POINTS: "reactor.after-perform:nth=1" })
      const cut = yield* runChild(child, [db, ledger, "serve", "job:a"], { FAULT_POINTS: "reconcile.mid:nth=1" })
      assert.strictEqual(cut.signal, "SIGKILL")
      const restarted = yield* runChild(child, [db, ledger, "serve", "job:a"])
      const [reconciled, settled] = jsonLines(restarted.stdout)
      // The first boot's settle committed before the kill; nothing is left running for this one.
      assert.deepStrictEqual(reconciled, { reconciled: { requeued: 0, failed: 0, alreadySettled: 0, quarantined: 0 } })
      assert.strictEqual(settled!.row.status, "failed")
    })
  )

  it.live("the same external event ingested twice across a crash yields one receipt and one set of events", () =>
    Effect.gen(function* () {
      const { db, ledger } = setup()
      const killed = yield* runChild(child, [db, ledger, "ingest", "evt-42"], {
        FAULT_POINTS: "dispatch.after-commit:nth=1"
      })
      assert.strictEqual(killed.signal, "SIGKILL")
      const again = yield* runChild(child, [db, ledger, "ingest", "evt-42"])
      assert.strictEqual(again.code, 0, again.stderr)
      const lines = jsonLines(again.stdout)
      const answer = lines.find((l) => "answer" in l)!.answer
      assert.strictEqual(answer.duplicate, true)
      assert.strictEqual(answer.commandId, "ingest:provider:evt-42")
      assert.deepStrictEqual(
        lines.find((l) => "counts" in l),
        { counts: { receipts: 1, events: 1 } }
      )
    })
  )

  it.live(
    "killed while performing, then the effect's aggregate cannot be replayed: every later boot succeeds with the row quarantined",
    () =>
      Effect.gen(function* () {
        const { db, ledger } = setup()
        const killed = yield* runChild(child, [db, ledger, "submit", "j1", "work.bound"], {
          FAULT_POINTS: "reactor.after-perform:kind=work.bound:nth=1"
        })
        assert.strictEqual(killed.signal, "SIGKILL")
        // Between the runs, the job's stored event stops decoding (a bad deploy or migration).
        yield* Effect.flatMap(
          SqlClient,
          (sql) => sql`UPDATE events SET payload = '{"type":"job.submitted","kind":42}' WHERE aggregate_id = 'j1'`
        ).pipe(Effect.provide(SqliteStore.layer({ filename: db })))
        const first = yield* runChild(child, [db, ledger, "boot", "job:j1"])
        assert.strictEqual(first.code, 0, first.stderr)
        const [reconciled, printed] = jsonLines(first.stdout)
        const row = printed!.row
        assert.deepStrictEqual(reconciled, {
          reconciled: { requeued: 0, failed: 0, alreadySettled: 0, quarantined: 1 }
        })
        assert.deepStrictEqual(
          [row.status, row.quarantine.reason, row.quarantine.by],
          ["quarantined", "aggregate-unavailable", "reconcile"]
        )
        const second = yield* runChild(child, [db, ledger, "boot", "job:j1"])
        assert.strictEqual(second.code, 0, second.stderr)
        const [again, printedAgain] = jsonLines(second.stdout)
        const still = printedAgain!.row
        assert.deepStrictEqual(again, { reconciled: { requeued: 0, failed: 0, alreadySettled: 0, quarantined: 0 } })
        assert.strictEqual(still.status, "quarantined")
        // Performed once, by the killed process; neither boot performed it again.
        assert.strictEqual(ledgerOf(ledger).length, 1)
      })
  )
})
