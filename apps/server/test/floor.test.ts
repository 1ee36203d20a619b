import { assert, describe, it } from "@effect/vitest"
import { driverError, FreeSpace, StorageFaults } from "@orchestration/engine"
import { Effect, Layer } from "effect"
import { domain as agents } from "../src/AgentsDomain.js"
import { effectStatus, postJson, raw, startServer, waitFor } from "./fixtures/server.js"

const open = (n: number) => ({ commandId: `o-${n}`, type: "account.open", accountId: `acc-${n}`, owner: `user${n}@example.com` })
const floor = 64 * 1024 * 1024

describe("the disk floor", () => {
  it.scopedLive("below the floor: new work is 503 and /health 503, nothing new is claimed, running outcomes land; space back resumes without restart", () =>
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
        yield* waitFor(`mail ${n}`, Effect.map(effectStatus(url, `o-${n}:welcome`), (r) => (r.status === "succeeded" ? r : undefined)))
      }
      // Slots are free now, but the fifth row must stay unclaimed. Proving a negative needs a real
      // wait: longer than the reactor's 1 s liveness poll.
      yield* Effect.sleep("1500 millis")
      assert.deepStrictEqual(yield* effectStatus(url, "o-5:welcome").pipe(Effect.map((r) => [r.status, r.attempts])), ["pending", 0])

      // Space returns: the parked row runs and new work is admitted, with no restart.
      probe.state.free = 10 * floor
      yield* waitFor("the parked mail", Effect.map(effectStatus(url, "o-5:welcome"), (r) => (r.status === "succeeded" ? r : undefined)))
      assert.strictEqual((yield* postJson(url, "/v1/commands", open(6))).status, 200)
      const back = yield* raw(url, "/health")
      assert.strictEqual(back.status, 200)
      assert.notStrictEqual(back.body.status, "unavailable")
    }))
  it.scopedLive("below the floor a client command that would change nothing is refused too: 100 interrupts of a missing thread write no receipt", () =>
    Effect.gen(function* () {
      const probe = FreeSpace.controllable(floor, floor - 1)
      const { url } = yield* startServer({ domain: agents, freeSpace: probe.layer })
      for (let n = 1; n <= 100; n++) {
        const refused = yield* postJson(url, "/v1/commands", { commandId: `int-${n}`, type: "turn.interrupt", threadId: "missing", turnId: "turn-1" })
        assert.strictEqual(refused.status, 503, `interrupt ${n}: ${JSON.stringify(refused.body)}`)
        assert.strictEqual(refused.body.error, "StorageUnavailable")
        assert.strictEqual(refused.body.reason, "below-floor")
        assert.strictEqual(refused.headers.get("retry-after"), "1")
      }
      // None of them left a receipt: the store was not written.
      for (const n of [1, 50, 100]) assert.strictEqual((yield* raw(url, `/v1/commands/int-${n}`)).status, 404)
      // Space back: the same command is accepted (and writes its receipt) now.
      probe.state.free = 10 * floor
      assert.strictEqual((yield* postJson(url, "/v1/commands", { commandId: "int-1", type: "turn.interrupt", threadId: "missing", turnId: "turn-1" })).status, 200)
      assert.strictEqual((yield* raw(url, "/v1/commands/int-1")).status, 200)
    }))
})

describe("a write the store refuses", () => {
  it.scopedLive("fails its command with 503 StorageUnavailable and /health reports the store not writable until a commit lands", () =>
    Effect.gen(function* () {
      // The disk fills faster than the floor check: the receipt write of one command gets SQLITE_FULL.
      const faults = Layer.succeed(StorageFaults, {
        before: (point, commandId) =>
          point === "receipts" && commandId === "o-full" ? Effect.fail(driverError("SQLITE_FULL", "database or disk is full")) : Effect.void
      })
      const { url } = yield* startServer({ storageFaults: faults })
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
      assert.strictEqual((yield* postJson(url, "/v1/commands", open(2))).status, 200)
      assert.strictEqual((yield* raw(url, "/health")).status, 200)
    }))
})
