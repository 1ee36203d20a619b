/**
 * What a command is answered, first time and on every retry: an accepted command's answer, and the
 * stored answer a receipt stands for (re-read from the log, so a retry is told exactly what the first
 * try was told), or a conflict when the same id comes with another payload or target.
 */
import { Effect, Exit } from "effect"
import type { EventRecord } from "./Aggregate.js"
import { CommandIdConflict, CommandRejected } from "./Errors.js"
import * as EventLog from "./EventLog.js"
import * as Receipts from "./Receipts.js"

/** A command accepted: what the client is told, first time and on every retry. */
export interface DispatchAnswer {
  readonly commandId: string
  readonly status: "accepted"
  readonly aggregateType: string
  readonly aggregateId: string
  /** The last event's sequence; the log head the command saw when it decided no events. */
  readonly sequence: number
  readonly events: ReadonlyArray<EventRecord>
  readonly effectIds: ReadonlyArray<string>
  readonly duplicate: boolean
}

/** Answers a command whose id already has a receipt: the stored answer, or a conflict. */
export const answerFromReceipt = (receipt: Receipts.Receipt, identity: Receipts.CommandIdentity) =>
  Effect.gen(function* () {
    const conflict = Receipts.conflictWith(receipt, identity)
    if (conflict !== undefined) {
      return Exit.fail(new CommandIdConflict({ commandId: identity.commandId, message: conflict }))
    }
    return yield* storedAnswer(receipt)
  })

/**
 * The answer a receipt stands for, re-read from the log so it equals the first answer. A receipt whose
 * row cannot be read answers a typed failure: the command was handled once, so deciding it again could
 * apply it twice, and what it was told cannot be known. Its row is left for an operator.
 */
export const storedAnswer = (receipt: Receipts.Receipt) =>
  Effect.gen(function* () {
    const damage = Receipts.damage(receipt)
    if (damage !== undefined) return Exit.fail(damage)
    if (receipt.status === "rejected") {
      return Exit.fail(
        new CommandRejected({
          commandId: receipt.commandId,
          aggregateType: receipt.aggregateType,
          aggregateId: receipt.aggregateId,
          reason: receipt.rejection?.reason ?? "rejected",
          message: receipt.rejection?.message ?? "rejected",
          duplicate: true
        })
      )
    }
    const events = receipt.firstSequence === null ? [] : yield* EventLog.forCommand(receipt.commandId)
    return Exit.succeed<DispatchAnswer>({
      commandId: receipt.commandId,
      status: "accepted",
      aggregateType: receipt.aggregateType,
      aggregateId: receipt.aggregateId,
      sequence: receipt.lastSequence,
      events,
      effectIds: receipt.effectIds,
      duplicate: true
    })
  })
