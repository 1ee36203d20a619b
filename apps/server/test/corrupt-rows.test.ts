import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { effectStatus, firstLife, onStore, postJson, raw, startServer, tempDataDir } from "./fixtures/server.js"
import { openAccount } from "./fixtures/AccountsDomain.js"

const command = openAccount("c-1", "a")

/**
 * A stored row the engine cannot read (cut off, edited by hand) is the store's damage: asking again reads
 * the same bytes. Answered as 503 it told clients to retry, for ever, what only an operator can repair.
 */
describe("a damaged stored row", () => {
  it.scopedLive(
    "a receipt that cannot be read: the retry and the receipt route answer 500 StorageCorrupt naming the damage, not 503",
    () =>
      Effect.gen(function* () {
        const dataDir = tempDataDir()
        // First life: the command is accepted and its receipt stored.
        yield* firstLife(dataDir, [command])
        // Between lives: its receipt's effect ids are cut off.
        yield* onStore(
          dataDir,
          Effect.flatMap(SqlClient, (sql) => sql`UPDATE receipts SET effect_ids = '["a' WHERE command_id = 'c-1'`)
        )
        const { url } = yield* startServer({ dataDir })
        const retried = yield* postJson(url, "/v1/commands", command)
        assert.strictEqual(retried.status, 500)
        assert.strictEqual(retried.body.error, "StorageCorrupt")
        assert.match(retried.body.message, /receipt of command 'c-1' cannot be read/)
        const receipt = yield* raw(url, "/v1/commands/c-1")
        assert.strictEqual(receipt.status, 500)
        assert.strictEqual(receipt.body.error, "StorageCorrupt")
        // Nothing was decided again: the log holds the one first acceptance.
        const events = yield* raw(url, "/v1/events")
        assert.strictEqual(
          (events.body.events as ReadonlyArray<{ type: string }>).filter((e) => e.type === "account.opened").length,
          1
        )
      })
  )

  it.scopedLive(
    "a parked row whose quarantine record cannot be read: release answers 500 StorageCorrupt scope row, the store stays writable, and the operator can still fail it",
    () =>
      Effect.gen(function* () {
        const dataDir = tempDataDir()
        // First life: an account whose welcome mail is due in an hour.
        yield* firstLife(dataDir, [{ ...command, owner: "later@example.com" }])
        // Between lives: the mail was parked, and its stored record was cut off.
        yield* onStore(
          dataDir,
          Effect.flatMap(
            SqlClient,
            (sql) =>
              sql`UPDATE outbox SET status = 'quarantined', quarantine = '{"reason":"aggr' WHERE effect_id = 'c-1:welcome'`
          )
        )
        const { url } = yield* startServer({ dataDir })
        const release = { method: "POST", headers: { "content-type": "application/json" } }
        const released = yield* raw(url, "/v1/effects/c-1%3Awelcome/release", release)
        assert.strictEqual(released.status, 500)
        assert.strictEqual(released.body.error, "StorageCorrupt")
        assert.strictEqual(released.body.scope, "row")
        assert.strictEqual(released.body.code, "QUARANTINE_UNREADABLE")
        assert.match(released.body.message, /quarantine record of effect 'c-1:welcome' cannot be read/)
        // One row's damage is not the store's: it still takes writes.
        const health = yield* raw(url, "/health")
        assert.deepStrictEqual([health.status, health.body.storage.writable], [200, true])
        // Still parked, and the operator's other action works.
        assert.strictEqual((yield* effectStatus(url, "c-1:welcome")).status, "quarantined")
        const failed = yield* postJson(url, "/v1/effects/c-1%3Awelcome/fail", {
          reason: "record lost; mail sent by hand"
        })
        assert.strictEqual(failed.status, 200)
        assert.strictEqual((yield* effectStatus(url, "c-1:welcome")).status, "failed")
      })
  )
})
