import { assert, describe, it } from "@effect/vitest"
import { driverError, FreeSpace, StorageFaults } from "@orchestration/engine"
import { Effect, Layer } from "effect"
import { domain as agents } from "../src/AgentsDomain.js"
import { effectStatus, postJson, raw, startServer, waitFor } from "./fixtures/server.js"
import { openAccount } from "./fixtures/AccountsDomain.js"

const open = (n: number) => openAccount(`o-${n}`, `acc-${n}`, `user${n}@example.com`)
const floor = 64 * 1024 * 1024

describe("the disk floor", () => {
  it.scopedLive(
    "below the floor: new work is 503 and /health 503, nothing new is claimed, running outcomes land; space back resumes without restart",
    () =>
      Effect.gen(function* () {
        const probe = FreeSpace.controllable(floor, 10 * floor)
        // Sending takes 800 ms, so four mails hold the reactor's four slots while the floor drops.
        const { url } = yield* startServer({ freeSpace: probe.layer, env: { EMAIL_DELAY_MS: "800" } })
        for (let n = 1; n <= 5; n++) assert.strictEqual((yield* postJson(url, "/v1/commands", open(n))).status, 200)
        probe.state.free = floor - 1

        const refused = yield* postJson(url, "/v1/commands", open(6))
        assert.strictEqual(refused.status, 503)
        assert.strictEqual(refused.body.error, "StorageUnavailable")
        assert.strictEqual(refused.body.reason, "below-floor")
        assert.strictEqual(refused.headers.get("retry-after"), "1")
        const health = yield* raw(url, "/health")
        assert.strictEqual(health.status, 503)
        assert.strictEqual(health.body.status, "unavailable")
        assert.deepStrictEqual(health.body.storage, { freeBytes: floor - 1, floorBytes: floor, writable: true })

        // The four running mails settle: their outcomes are internal commands, admitted below the floor.
        for (let n = 1; n <= 4; n++) {
          yield* waitFor(
            `mail ${n}`,
            Effect.map(effectStatus(url, `o-${n}:welcome`), (r) => (r.status === "succeeded" ? r : undefined))
          )
        }
        // Slots are free now, but the fifth row must stay unclaimed. Proving a negative needs a real
        // wait: longer than the reactor's 1 s liveness poll.
        yield* Effect.sleep("1500 millis")
        assert.deepStrictEqual(
          yield* effectStatus(url, "o-5:welcome").pipe(Effect.map((r) => [r.status, r.attempts])),
          ["pending", 0]
        )

        // Space returns: the parked row runs and new work is admitted, with no restart.
        probe.state.free = 10 * floor
        yield* waitFor(
          "the parked mail",
          Effect.map(effectStatus(url, "o-5:welcome"), (r) => (r.status === "succeeded" ? r : undefined))
        )
        assert.strictEqual((yield* postJson(url, "/v1/commands", open(6))).status, 200)
        const back = yield* raw(url, "/health")
        assert.strictEqual(back.status, 200)
        assert.notStrictEqual(back.body.status, "unavailable")
      })
  )
  it.scopedLive(
    "below the floor a client command that would change nothing is refused too: 100 interrupts of a missing thread write no receipt",
    () =>
      Effect.gen(function* () {
        const probe = FreeSpace.controllable(floor, floor - 1)
        const { sql, url } = yield* startServer({ domain: agents, freeSpace: probe.layer })
        const receipts = Effect.map(sql<{ n: number }>`SELECT COUNT(*) AS n FROM receipts`, (rows) =>
          Number(rows[0]!.n)
        )
        const before = yield* receipts
        for (let n = 1; n <= 100; n++) {
          const refused = yield* postJson(url, "/v1/commands", {
            commandId: `int-${n}`,
            type: "turn.interrupt",
            threadId: "missing",
            turnId: "turn-1"
          })
          assert.strictEqual(refused.status, 503, `interrupt ${n}: ${JSON.stringify(refused.body)}`)
          assert.strictEqual(refused.body.error, "StorageUnavailable")
          assert.strictEqual(refused.body.reason, "below-floor")
          assert.strictEqual(refused.headers.get("retry-after"), "1")
        }
        // None of them left a receipt: the store was not written.
        assert.strictEqual(yield* receipts, before)
        for (const n of [1, 50, 100]) assert.strictEqual((yield* raw(url, `/v1/commands/int-${n}`)).status, 404)
        // Space back: the same command is accepted (and writes its receipt) now.
        probe.state.free = 10 * floor
        assert.strictEqual(
          (yield* postJson(url, "/v1/commands", {
            commandId: "int-1",
            type: "turn.interrupt",
            threadId: "missing",
            turnId: "turn-1"
          })).status,
          200
        )
        assert.strictEqual((yield* raw(url, "/v1/commands/int-1")).status, 200)
      })
  )
})

/** Every receipt write fails with the driver's `code` while `failing` is set (the store's fault points). */
const receiptWritesFailing = (code: string, message: string) => {
  const refusal = { failing: false }
  const faults = Layer.succeed(StorageFaults, {
    before: (point) => (point === "receipts" && refusal.failing ? Effect.fail(driverError(code, message)) : Effect.void)
  })
  return Object.assign(refusal, { faults })
}

describe("a write the store refuses", () => {
  it.scopedLive(
    "a store that reports its file damaged (SQLITE_CORRUPT): 500 StorageCorrupt, not retried, and /health unavailable (a row's damage alone leaves health as it is)",
    () =>
      Effect.gen(function* () {
        const file = receiptWritesFailing("SQLITE_CORRUPT", "database disk image is malformed")
        const { url } = yield* startServer({ storageFaults: file.faults, env: { STORAGE_PROBE_MS: "100" } })
        file.failing = true
        const refused = yield* postJson(url, "/v1/commands", { ...open(1), commandId: "o-corrupt" })
        assert.strictEqual(refused.status, 500)
        assert.strictEqual(refused.body.error, "StorageCorrupt")
        assert.strictEqual(refused.body.scope, "store")
        const health = yield* raw(url, "/health")
        assert.deepStrictEqual([health.status, health.body.storage.writable], [503, false])
      })
  )

  it.scopedLive(
    "fails its command with 503 StorageUnavailable; /health reports the store not writable until its probe write lands, with no client write",
    () =>
      Effect.gen(function* () {
        // The disk fills faster than the floor check: while `full`, every receipt write gets SQLITE_FULL.
        const disk = receiptWritesFailing("SQLITE_FULL", "database or disk is full")
        const { url } = yield* startServer({ storageFaults: disk.faults, env: { STORAGE_PROBE_MS: "100" } })
        disk.failing = true
        const refused = yield* postJson(url, "/v1/commands", { ...open(1), commandId: "o-full" })
        assert.strictEqual(refused.status, 503)
        assert.strictEqual(refused.body.error, "StorageUnavailable")
        assert.strictEqual(refused.body.reason, "disk-full")
        assert.strictEqual(refused.headers.get("retry-after"), "1")
        // Nothing of it committed.
        assert.strictEqual((yield* raw(url, "/v1/commands/o-full")).status, 404)
        const health = yield* raw(url, "/health")
        assert.strictEqual(health.status, 503)
        assert.strictEqual(health.body.storage.writable, false)
        // Still full over many probe intervals (a real wait proves the negative): still 503.
        yield* Effect.sleep("1 second")
        assert.deepStrictEqual(yield* Effect.map(raw(url, "/health"), (r) => [r.status, r.body.storage.writable]), [
          503,
          false
        ])
        // Room again: the probe finds out by itself.
        disk.failing = false
        const back = yield* waitFor(
          "/health 200 without a client write",
          Effect.map(raw(url, "/health"), (r) => (r.status === 200 ? r : undefined))
        )
        assert.strictEqual(back.body.storage.writable, true)
        assert.strictEqual((yield* postJson(url, "/v1/commands", open(2))).status, 200)
      })
  )

  it.scopedLive(
    "a real SQLITE_FULL: /health stays 503 while the store is full and returns to 200 by itself once it has room",
    () =>
      Effect.gen(function* () {
        const { sql, url } = yield* startServer({ env: { STORAGE_PROBE_MS: "100" } })
        assert.strictEqual((yield* postJson(url, "/v1/commands", open(1))).status, 200)
        // Compacted first: migrations that rebuild a table leave free pages a write could reuse.
        yield* sql.unsafe("VACUUM")
        const [pages] = yield* sql<{ page_count: number }>`PRAGMA page_count`
        yield* sql.unsafe(`PRAGMA max_page_count = ${Number(pages!.page_count)}`)
        // An owner of 20 kB needs new pages: the store refuses it.
        const refused = yield* postJson(url, "/v1/commands", { ...open(2), owner: "x".repeat(20_000) })
        assert.deepStrictEqual(
          [refused.status, refused.body.error, refused.body.reason],
          [503, "StorageUnavailable", "disk-full"]
        )
        // Still full over many probe intervals: the probe's write is refused too, so health stays 503.
        // Proving a negative needs a real wait (ten probes).
        yield* Effect.sleep("1 second")
        const full = yield* raw(url, "/health")
        assert.deepStrictEqual([full.status, full.body.storage.writable], [503, false])
        // Room again (as when space is freed): no client writes, health comes back by itself.
        yield* sql.unsafe("PRAGMA max_page_count = 1073741823")
        const back = yield* waitFor(
          "/health 200 without a client write",
          Effect.map(raw(url, "/health"), (r) => (r.status === 200 ? r : undefined))
        )
        assert.strictEqual(back.body.storage.writable, true)
        assert.strictEqual((yield* raw(url, "/v1/commands/o-2")).status, 404)
      })
  )
})
