import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { firstLife, onStore, postJson, raw, startServer, tempDataDir } from "./fixtures/server.js"

const command = { commandId: "c-1", type: "account.open", accountId: "a", owner: "ada" }

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
})
