/**
 * One receipt per command id. The first handling of a command writes its receipt in the same
 * transaction as its events; a retry finds it and gets the stored answer without anything being
 * decided or written again. The id is bound to the exact command: another payload, type or
 * aggregate under the same id is a conflict, never a silent success.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { RECEIPT_UNREADABLE, StorageFailure } from "./Errors.js"
import * as StoredJson from "./StoredJson.js"
import * as TableColumns from "./storage/TableColumns.js"

export interface Receipt {
  readonly commandId: string
  readonly aggregateType: string
  readonly aggregateId: string
  readonly commandType: string
  readonly fingerprint: string
  readonly status: "accepted" | "rejected"
  /** First event's sequence; null when the command decided no events. */
  readonly firstSequence: number | null
  /** Last event's sequence, or the log head the command saw when it decided no events. */
  readonly lastSequence: number
  readonly effectIds: ReadonlyArray<string>
  readonly rejection: { readonly reason: string; readonly message: string } | null
  readonly acceptedAt: number
  /**
   * Set when the stored row's JSON columns cannot be read (cut off, edited by hand): why, bounded.
   * Its identity columns still are, so a conflict is still found; otherwise the command is answered
   * with a typed failure (StoredAnswers), and only that command: the rest of its batch goes on.
   */
  readonly unreadable?: string
}

/** What identifies a command for receipt matching. */
export interface CommandIdentity {
  readonly commandId: string
  readonly aggregateType: string
  readonly aggregateId: string
  readonly commandType: string
  readonly fingerprint: string
}

/**
 * Pure: does a stored receipt answer this command? `undefined` when it does; otherwise the reason
 * the id is in conflict. Everything is compared, not only the aggregate.
 */
export const conflictWith = (receipt: CommandIdentity, incoming: CommandIdentity): string | undefined => {
  if (receipt.commandType !== incoming.commandType) {
    return `command id '${incoming.commandId}' was used for a '${receipt.commandType}' command, not '${incoming.commandType}'`
  }
  if (receipt.aggregateType !== incoming.aggregateType || receipt.aggregateId !== incoming.aggregateId) {
    return `command id '${incoming.commandId}' was used for ${receipt.aggregateType} '${receipt.aggregateId}', not ${incoming.aggregateType} '${incoming.aggregateId}'`
  }
  if (receipt.fingerprint !== incoming.fingerprint) {
    return `command id '${incoming.commandId}' was used with another payload`
  }
  return undefined
}

/** A receipts row as every driver returns it (the commit writers read it too). */
export interface ReceiptRow {
  readonly command_id: string
  readonly aggregate_type: string
  readonly aggregate_id: string
  readonly command_type: string
  readonly fingerprint: string
  readonly status: "accepted" | "rejected"
  readonly first_sequence: number | null
  readonly last_sequence: number
  readonly effect_ids: string
  readonly rejection: string | null
  readonly accepted_at: number
}

/** Every column of `receipts`, in the migrated schema's order (test/table-columns.test.ts holds the two together). */
export const columns = [
  "command_id",
  "aggregate_type",
  "aggregate_id",
  "command_type",
  "fingerprint",
  "status",
  "first_sequence",
  "last_sequence",
  "effect_ids",
  "rejection",
  "accepted_at"
] as const satisfies ReadonlyArray<keyof ReceiptRow>

/**
 * A receipt marked unreadable as the failure its readers answer: the command was handled once, and what
 * it was told cannot be known, so neither a retry nor a read may guess (StoredAnswers.storedAnswer, the
 * server's receipt route). Undefined for a readable receipt.
 */
export const damage = (receipt: Receipt): StorageFailure | undefined =>
  receipt.unreadable === undefined
    ? undefined
    : new StorageFailure({
        reason: "corrupt",
        code: RECEIPT_UNREADABLE,
        operation: "read receipt",
        message: `the receipt of command '${receipt.commandId}' cannot be read: ${receipt.unreadable}`
      })

/** Never throws: a damaged row is a receipt marked `unreadable` (it used to fail its whole batch). */
export const toReceipt = (row: ReceiptRow): Receipt => {
  const receipt: Receipt = {
    commandId: row.command_id,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    commandType: row.command_type,
    fingerprint: row.fingerprint,
    status: row.status,
    firstSequence: row.first_sequence === null ? null : Number(row.first_sequence),
    lastSequence: Number(row.last_sequence),
    effectIds: [],
    rejection: null,
    acceptedAt: Number(row.accepted_at)
  }
  const effectIds = StoredJson.read(row.effect_ids, "effect-id list")
  if (!effectIds.ok) return { ...receipt, unreadable: effectIds.why }
  if (!Array.isArray(effectIds.value) || effectIds.value.some((id) => typeof id !== "string")) {
    return { ...receipt, unreadable: "its stored effect ids are not a list of ids" }
  }
  if (row.rejection === null) return { ...receipt, effectIds: effectIds.value }
  const rejection = StoredJson.read(row.rejection, "rejection")
  if (!rejection.ok) return { ...receipt, unreadable: rejection.why }
  const value = rejection.value as { readonly reason?: unknown; readonly message?: unknown } | null
  if (typeof value?.reason !== "string" || typeof value.message !== "string") {
    return { ...receipt, unreadable: "its stored rejection has no reason and message" }
  }
  return { ...receipt, effectIds: effectIds.value, rejection: { reason: value.reason, message: value.message } }
}

/** What writing a receipt stores, and how (the commit writers and `insert` build their statements from it). */
export const insertShape = TableColumns.insertShape<Receipt>()("receipts", {
  command_id: "text",
  aggregate_type: "text",
  aggregate_id: "text",
  command_type: "text",
  fingerprint: "text",
  status: "text",
  first_sequence: "int",
  last_sequence: "int",
  effect_ids: { type: "text", encode: (r) => JSON.stringify(r.effectIds) },
  rejection: { type: "text", encode: (r) => (r.rejection === null ? null : JSON.stringify(r.rejection)) },
  accepted_at: "int"
})

export const find = (commandIds: ReadonlyArray<string>) =>
  Effect.flatMap(
    SqlClient,
    (sql) => sql<ReceiptRow>`SELECT * FROM receipts WHERE ${sql.in("command_id", commandIds)}`
  ).pipe(Effect.map((rows) => new Map(rows.map((row) => [row.command_id, toReceipt(row)]))))

export const findOne = (commandId: string) => Effect.map(find([commandId]), (receipts) => receipts.get(commandId))

export const insert = (receipt: Receipt) =>
  Effect.flatMap(
    SqlClient,
    (sql) => sql`INSERT INTO receipts ${sql.insert(TableColumns.toRecord(insertShape, receipt))}`
  )
