/**
 * The store's fast commit writer (SQLite: the raw connection; PostgreSQL: named `unnest` statements)
 * against the reference, the generic writer over the table modules: the same writes, in a write
 * transaction on a fresh store, leave the same rows and give the same answers. Runs on SQLite and in
 * the PostgreSQL conformance run, so each store's own writer is held to the reference.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { NewEvent } from "../src/EventLog.js"
import type { NewOutboxRow } from "../src/Outbox.js"
import type { Receipt } from "../src/Receipts.js"
import * as CommitWriter from "../src/storage/CommitWriter.js"
import { migrate } from "../src/storage/Migrations.js"
import { writeTransaction } from "../src/storage/Transactions.js"
import * as TestStore from "../src/testing/TestStore.js"

const event = (n: number, commandId: string): NewEvent => ({
  eventId: `${commandId}/e${n}`,
  aggregateType: "account",
  aggregateId: "a1",
  version: n,
  type: "account.deposited",
  schemaVersion: 1,
  payloadJson: JSON.stringify({ type: "account.deposited", amount: n }),
  commandId,
  occurredAt: 1_000 + n
})

const outboxRow = (effectId: string, commandId: string, now: number): NewOutboxRow => ({
  effectId,
  commandId,
  aggregateType: "account",
  aggregateId: "a1",
  kind: "email.send",
  payloadJson: JSON.stringify({ to: "ada" }),
  lane: "account:a1",
  availableAt: now + 5,
  now
})

const receipt = (commandId: string, over: Partial<Receipt> = {}): Receipt => ({
  commandId,
  aggregateType: "account",
  aggregateId: "a1",
  commandType: "account.deposit",
  fingerprint: `fp-${commandId}`,
  status: "accepted",
  firstSequence: 1,
  lastSequence: 2,
  effectIds: ["mail-1"],
  rejection: null,
  acceptedAt: 2_000,
  ...over
})

/** Two commands' writes, two receipts at once (one rejected), and a repeated effect id (kept as the first wrote it). */
const writes = (writer: CommitWriter.CommitWriter) =>
  writeTransaction(
    "test",
    Effect.gen(function* () {
      const before = yield* writer.findReceipts(["c1", "c2"])
      const first = yield* writer.appendEvents([event(1, "c1"), event(2, "c1")])
      yield* writer.insertOutbox([outboxRow("mail-1", "c1", 1_500)])
      yield* writer.insertReceipts([receipt("c1")])
      const second = yield* writer.appendEvents([event(3, "c2")])
      yield* writer.insertOutbox([outboxRow("mail-1", "c2", 1_600), outboxRow("mail-2", "c2", 1_600)])
      yield* writer.insertReceipts([
        receipt("c2", { firstSequence: 3, lastSequence: 3, effectIds: ["mail-1", "mail-2"] })
      ])
      // Several receipts at once, as a batch's settlements write theirs (SettlementWrites.ts).
      yield* writer.insertReceipts([
        receipt("c3", {
          status: "rejected",
          firstSequence: null,
          lastSequence: 3,
          effectIds: [],
          rejection: { reason: "not-open", message: "no" }
        }),
        receipt("c4", { commandType: "effect.succeed", firstSequence: null, lastSequence: 3, effectIds: [] })
      ])
      const after = yield* writer.findReceipts(["c1", "c2", "c3", "c4"])
      return { before: [...before], first, second, after: [...after].sort(([a], [b]) => a.localeCompare(b)) }
    })
  )

const rows = Effect.gen(function* () {
  const sql = yield* SqlClient
  return {
    events: yield* sql`SELECT * FROM events ORDER BY sequence`,
    outbox: yield* sql`SELECT * FROM outbox ORDER BY sequence`,
    receipts: yield* sql`SELECT * FROM receipts ORDER BY command_id`
  }
})

const on = (pick: "store" | "generic") =>
  Effect.gen(function* () {
    yield* migrate
    const writer = pick === "generic" ? CommitWriter.genericCommitWriter : yield* CommitWriter.forStore
    const answers = yield* writes(writer)
    return { writer, answers, rows: yield* rows }
  }).pipe(Effect.provide(TestStore.layer()))

/**
 * Two accepted commands, one with events and one without, written by the store's one-statement
 * command write where it has one, else by the three calls with the receipt's sequences filled in.
 */
const commandWrites = (writer: CommitWriter.CommitWriter) =>
  writeTransaction(
    "test",
    Effect.gen(function* () {
      const base = (commandId: string, effectIds: ReadonlyArray<string>) => {
        const { firstSequence: _f, lastSequence: _l, ...rest } = receipt(commandId, { effectIds })
        return rest
      }
      const one = (
        events: ReadonlyArray<NewEvent>,
        effects: ReadonlyArray<NewOutboxRow>,
        r: ReturnType<typeof base>,
        head: number
      ) =>
        writer.writeCommand !== undefined
          ? writer.writeCommand(events, effects, r, head)
          : Effect.gen(function* () {
              const records = yield* writer.appendEvents(events)
              yield* writer.insertOutbox(effects)
              yield* writer.insertReceipts([
                {
                  ...r,
                  firstSequence: records[0]?.sequence ?? null,
                  lastSequence: records.at(-1)?.sequence ?? head
                }
              ])
              return records
            })
      const first = yield* one(
        [event(1, "c1"), event(2, "c1")],
        [outboxRow("mail-1", "c1", 1_500)],
        base("c1", ["mail-1"]),
        0
      )
      const second = yield* one([], [outboxRow("mail-2", "c2", 1_600)], base("c2", ["mail-2"]), 2)
      return { first, second }
    })
  )

const commandsOn = (pick: "store" | "generic") =>
  Effect.gen(function* () {
    yield* migrate
    const writer = pick === "generic" ? CommitWriter.genericCommitWriter : yield* CommitWriter.forStore
    const answers = yield* commandWrites(writer)
    return { answers, rows: yield* rows }
  }).pipe(Effect.provide(TestStore.layer()))

/**
 * A run of four commands (events and an effect; a rejection; no events but an effect; events) through
 * writeCommands (the generic writer's writes them one by one, as the processor writes one alone): each
 * receipt's last sequence is its own last event, else the newest before it, else the head given.
 */
const runWrites = (writer: CommitWriter.CommitWriter) =>
  writeTransaction(
    "test",
    Effect.gen(function* () {
      const base = (commandId: string, over: Partial<Receipt>) => {
        const { firstSequence: _f, lastSequence: _l, ...rest } = receipt(commandId, over)
        return rest
      }
      const run: ReadonlyArray<CommitWriter.CommandRows> = [
        {
          events: [event(5, "c1"), event(6, "c1")],
          effects: [outboxRow("mail-1", "c1", 1_500)],
          receipt: base("c1", { effectIds: ["mail-1"] })
        },
        {
          events: [],
          effects: [],
          receipt: base("c2", { status: "rejected", effectIds: [], rejection: { reason: "closed", message: "no" } })
        },
        { events: [], effects: [outboxRow("mail-2", "c3", 1_600)], receipt: base("c3", { effectIds: ["mail-2"] }) },
        { events: [event(7, "c4")], effects: [], receipt: base("c4", { effectIds: [] }) }
      ]
      // A rejection first in its run, with nothing before it: its receipt holds the head given.
      const lone: ReadonlyArray<CommitWriter.CommandRows> = [
        {
          events: [],
          effects: [],
          receipt: base("c5", { status: "rejected", effectIds: [], rejection: { reason: "closed", message: "no" } })
        }
      ]
      const write = (commands: ReadonlyArray<CommitWriter.CommandRows>, head: number) =>
        writer.writeCommands(commands, head)
      const records = yield* write(run, 40)
      const more = yield* write(lone, 77)
      return { records, more }
    })
  )

const runOn = (pick: "store" | "generic") =>
  Effect.gen(function* () {
    yield* migrate
    const writer = pick === "generic" ? CommitWriter.genericCommitWriter : yield* CommitWriter.forStore
    const answers = yield* runWrites(writer)
    return { answers, rows: yield* rows }
  }).pipe(Effect.provide(TestStore.layer()))

describe("commit writers", () => {
  it.effect("a run of commands written at once leaves the rows and answers of each written alone", () =>
    Effect.gen(function* () {
      const fast = yield* runOn("store")
      const reference = yield* runOn("generic")
      assert.deepStrictEqual(fast.answers, reference.answers)
      assert.deepStrictEqual(fast.rows, reference.rows)
      const receipts = reference.rows.receipts as ReadonlyArray<{
        command_id: string
        status: string
        first_sequence: unknown
        last_sequence: unknown
      }>
      const seq = (v: unknown) => (v === null ? null : Number(v))
      assert.deepStrictEqual(
        receipts.map((r) => [r.command_id, r.status, seq(r.first_sequence), seq(r.last_sequence)]),
        [
          ["c1", "accepted", 1, 2],
          ["c2", "rejected", null, 2],
          ["c3", "accepted", null, 2],
          ["c4", "accepted", 3, 3],
          ["c5", "rejected", null, 77]
        ]
      )
      assert.deepStrictEqual(
        fast.answers.records.map((r) => r.map((e) => Number(e.sequence))),
        [[1, 2], [], [], [3]]
      )
    })
  )

  it.effect("a command written in one statement leaves the rows and answer of the three separate writes", () =>
    Effect.gen(function* () {
      const fast = yield* commandsOn("store")
      const reference = yield* commandsOn("generic")
      assert.deepStrictEqual(fast.answers, reference.answers)
      assert.deepStrictEqual(fast.rows, reference.rows)
      const receipts = reference.rows.receipts as ReadonlyArray<{ first_sequence: unknown; last_sequence: unknown }>
      // c1's receipt spans its two events; c2 decided none, so its receipt holds the head it saw.
      assert.deepStrictEqual(
        receipts.map((r) => [r.first_sequence === null ? null : Number(r.first_sequence), Number(r.last_sequence)]),
        [
          [1, 2],
          [null, 2]
        ]
      )
    })
  )

  it.effect("the store's own writer writes the rows and gives the answers of the generic reference", () =>
    Effect.gen(function* () {
      const fast = yield* on("store")
      const reference = yield* on("generic")
      assert.notStrictEqual(fast.writer, CommitWriter.genericCommitWriter)
      assert.deepStrictEqual(fast.answers, reference.answers)
      assert.deepStrictEqual(fast.rows, reference.rows)
      // What was meant to be written was: three events, two outbox rows (mail-1 once), four receipts.
      assert.deepStrictEqual(
        [reference.rows.events.length, reference.rows.outbox.length, reference.rows.receipts.length],
        [3, 2, 4]
      )
      assert.deepStrictEqual(
        reference.answers.second.map((e) => Number(e.sequence)),
        [3]
      )
    })
  )
})
