/**
 * Whether the store takes a write now, asked with one write transaction that leaves nothing behind:
 * it inserts a receipt under a reserved id and deletes it again before the commit. The row carries
 * two pages of padding so that it needs new pages, as a command's write does: an in-place write
 * passes on a store with no room to grow. A refusal is the StorageFailure a command would get. It
 * passes the receipts write point, so writes refused there (StorageFaults) refuse the probe too.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Clock, Effect, Option } from "effect"
import * as Receipts from "../Receipts.js"
import { StorageFaults } from "./StorageFaults.js"
import { writeTransaction } from "./Transactions.js"

/** Under the engine's reserved prefix: no client command can hold this id. */
export const probeCommandId = "engine:write-probe"

const padding = "0".repeat(8192)

export const probeWrite = writeTransaction(
  "write probe",
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const faults = yield* Effect.serviceOption(StorageFaults)
    if (Option.isSome(faults)) yield* faults.value.before("receipts", probeCommandId)
    yield* Receipts.insert({
      commandId: probeCommandId,
      aggregateType: "engine",
      aggregateId: "write-probe",
      commandType: "engine.write-probe",
      fingerprint: padding,
      status: "accepted",
      firstSequence: null,
      lastSequence: 0,
      effectIds: [],
      rejection: null,
      acceptedAt: yield* Clock.currentTimeMillis
    })
    yield* sql`DELETE FROM receipts WHERE command_id = ${probeCommandId}`
  })
)
