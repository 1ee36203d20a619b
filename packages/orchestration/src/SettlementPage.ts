/**
 * The settlements of one dispatch batch, read and written a page at a time. A settlement checks the
 * row it targets and then changes it; one by one that is a read, a cursor update and a row update
 * per settlement. Here the rows of a run of settlements are read in one query, each settlement is
 * still decided alone against the row as the batch has left it (so two settlements of one row in a
 * batch see each other), and the changes are written in one statement per table when the run ends:
 * one UPDATE of the outbox rows and, only if some row became pending again, one UPDATE of the
 * cursors that could be above it. Receipts, events and what the aggregate is told are the
 * processor's, unchanged. A change counts only once its command's savepoint held (`keep`); a
 * command that failed drops it (`drop`), so the page writes exactly what the one-by-one path would.
 * A command that is not a settlement may read or write outbox rows, so the processor flushes the
 * page before it and forgets what the page read (`flush`).
 *
 * A decision's `cancel` of a row the page has read goes through the page too (`cancel`): a direct
 * UPDATE would be shadowed by the page, which still holds the row as it was read (a later settle of
 * it would be decided against `running` and applied) and writes its own change over the cancel at
 * `flush` (a requeue or a retry the page has not written yet would undo it).
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import type { RowChange } from "./EffectOutcomes.js"
import * as Outbox from "./Outbox.js"
import * as ReactorCursors from "./ReactorCursors.js"

interface Staged {
  readonly row: Outbox.OutboxRow
  readonly change: RowChange
  readonly now: number
}

export interface SettlementPage {
  /** Reads the rows of these effects in one query, unless the page knows them already. */
  readonly prefetch: (effectIds: ReadonlyArray<string>) => Effect.Effect<void, SqlError, SqlClient>
  /** The row as this batch has left it so far. */
  readonly find: (effectId: string) => Effect.Effect<Outbox.OutboxRow | undefined, SqlError, SqlClient>
  /**
   * `find` without a read: the row when the page has read it (`undefined` inside when the effect has
   * no row), or `undefined` when the page has not read it yet.
   */
  readonly peek: (effectId: string) => { readonly row: Outbox.OutboxRow | undefined } | undefined
  /** Stages a change decided against `find`'s row; it counts once `keep` is called. */
  readonly apply: (effectId: string, attempt: number, change: RowChange, now: number) => Effect.Effect<void>
  /** `apply`, run at once. */
  readonly stage: (effectId: string, attempt: number, change: RowChange, now: number) => void
  /**
   * A decision's cancel (Outbox.cancelUnsettled), staged like a settlement's change when the page has
   * read the row: a pending or running row of this aggregate, as the batch has left it, is cancelled
   * and keeps its lease. False when the page has not read the row: the caller writes the cancel
   * itself, and nothing in the page can shadow it.
   */
  readonly cancel: (
    effectId: string,
    aggregateType: string,
    aggregateId: string,
    reason: string,
    now: number
  ) => boolean
  /** The current command committed to its savepoint: its staged changes join the page, in order. */
  readonly keep: () => void
  /** The current command failed or was rejected: its staged changes are dropped. */
  readonly drop: () => void
  /** Writes the page's changes (one statement per table) and forgets the rows it read. */
  readonly flush: Effect.Effect<void, SqlError, SqlClient>
}

/** Rows per UPDATE: 11 parameters a row stays well under either store's limit. */
const WRITE_CHUNK = 500

/** Pure: the row after a change, as Outbox.applyChanges writes it. */
export const changed = (row: Outbox.OutboxRow, change: RowChange, now: number): Outbox.OutboxRow => ({
  ...row,
  status: change.status,
  availableAt: change.availableAt ?? row.availableAt,
  response:
    change.response === undefined ? row.response : change.response === null ? null : JSON.parse(change.response),
  error: change.error === undefined ? row.error : change.error === null ? null : JSON.parse(change.error),
  leaseOwner: change.keepLease === true ? row.leaseOwner : null,
  leaseExpiresAt: change.keepLease === true ? row.leaseExpiresAt : null,
  operatorActions: row.operatorActions + (change.operatorAction === true ? 1 : 0),
  updatedAt: now
})

export const make = (): SettlementPage => {
  // What the page read: a row, or undefined for an effect id that has no row.
  const known = new Map<string, Outbox.OutboxRow | undefined>()
  const changes: Array<Outbox.PagedChange> = []
  const positions = new Map<string, number>()
  // The current command's changes: its settlement's, then its decision's cancels.
  let staged: Array<Staged> = []

  /** The row as the batch has left it, with the current command's staged changes. */
  const current = (effectId: string): Outbox.OutboxRow | undefined => {
    for (let i = staged.length - 1; i >= 0; i--) {
      const s = staged[i]!
      if (s.row.effectId === effectId) return changed(s.row, s.change, s.now)
    }
    return known.get(effectId)
  }

  const prefetch = (effectIds: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      const missing = [...new Set(effectIds.filter((id) => !known.has(id)))]
      if (missing.length === 0) return
      for (let start = 0; start < missing.length; start += WRITE_CHUNK) {
        const chunk = missing.slice(start, start + WRITE_CHUNK)
        const rows = yield* Outbox.findMany(chunk)
        for (const id of chunk) known.set(id, rows.get(id))
      }
    })

  const find = (effectId: string) =>
    known.has(effectId)
      ? Effect.succeed(known.get(effectId))
      : Effect.tap(Outbox.findForDecision(effectId), (row) => Effect.sync(() => known.set(effectId, row)))

  const stage = (effectId: string, attempt: number, change: RowChange, now: number) => {
    const row = current(effectId)
    // decideSettlement applied the change to the row `find` returned, so the page knows it.
    if (row === undefined || row.attempts !== attempt) return
    staged.push({ row, change, now })
  }

  const cancel = (effectId: string, aggregateType: string, aggregateId: string, reason: string, now: number) => {
    const row = current(effectId)
    if (row === undefined) return false
    // As cancelUnsettled's WHERE: only this aggregate's rows, only unsettled ones.
    if (row.aggregateType !== aggregateType || row.aggregateId !== aggregateId) return true
    if (row.status !== "pending" && row.status !== "running") return true
    const error = JSON.stringify({ message: reason, reason: "cancelled" })
    staged.push({ row, change: { status: "cancelled", error, keepLease: true }, now })
    return true
  }

  const keepOne = ({ row, change, now }: Staged) => {
    const next: Outbox.PagedChange = {
      effectId: row.effectId,
      sequence: row.sequence,
      attempt: row.attempts,
      fromStatus: row.status,
      status: change.status,
      availableAt: change.availableAt,
      response: change.response,
      error: change.error,
      keepLease: change.keepLease === true,
      operatorActions: change.operatorAction === true ? 1 : 0,
      requeued: change.status === "pending",
      now
    }
    // One row changed twice in a page (a requeue, then a cancel): one UPDATE row, both changes in
    // order, since an UPDATE … FROM that matches a row twice applies only one of them.
    const index = positions.get(row.effectId)
    if (index === undefined) positions.set(row.effectId, changes.push(next) - 1)
    else changes[index] = Outbox.composeChanges(changes[index]!, next)
    known.set(row.effectId, changed(row, change, now))
  }

  const keep = () => {
    const kept = staged
    staged = []
    for (const s of kept) keepOne(s)
  }

  const flush = Effect.suspend(() => {
    staged = []
    known.clear()
    if (changes.length === 0) return Effect.void
    const page = changes.splice(0, changes.length)
    positions.clear()
    return Effect.gen(function* () {
      // A row pending again may sit below a reactor's cursor: move those cursors back, once per page.
      const requeued = page.filter((c) => c.requeued)
      if (requeued.length > 0) yield* ReactorCursors.moveCursorsBelow(Math.min(...requeued.map((c) => c.sequence)))
      for (let start = 0; start < page.length; start += WRITE_CHUNK) {
        yield* Outbox.applyChanges(page.slice(start, start + WRITE_CHUNK))
      }
    })
  })

  return {
    prefetch,
    find,
    peek: (effectId) => (known.has(effectId) ? { row: known.get(effectId) } : undefined),
    apply: (effectId, attempt, change, now) => Effect.sync(() => stage(effectId, attempt, change, now)),
    stage,
    cancel,
    keep,
    drop: () => {
      staged = []
    },
    flush
  }
}
