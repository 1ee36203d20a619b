/**
 * Which outbox rows this process's recent commits may have moved out of `running`, so a performer's
 * cancel watch (CancelWatch.ts) can tell a commit that concerns its performances from one that does
 * not. Without it the watch read its rows after every commit while anything ran: on PostgreSQL one
 * statement in seven of the end-to-end path (docs/benchmarks-postgres.md), every one of them finding
 * nothing, because a commit that submits new work or settles another performance leaves a watched
 * row as it was.
 *
 * A local commit names the rows it may have taken out of a performer's hands: the effect of every
 * settlement it accepted (an outcome, an operator's retry or cancel, reconcile's and the dead-owner
 * sweep's settlements) and every row a decision cancelled. Anything this process cannot itemize
 * (another process's commit, seen only as a hint) is recorded as "any row". Only the last `KEPT`
 * commits are remembered; a reader that fell further behind is told "any row" too. So the answer errs
 * only towards reading: a row is reported untouched only when every commit since the reader's mark
 * was itemized and none named it.
 */

/** Commits remembered. A watch is rung after each, so it rarely falls more than a few behind. */
const KEPT = 64

export interface OutboxTouches {
  /** Called before the commit's ring: the rows it may have changed, or `undefined` for "any row". */
  readonly record: (effectIds: ReadonlyArray<string> | undefined) => void
  /** The mark of the newest commit recorded (a reader keeps it with what it read). */
  readonly mark: () => number
  /** Whether a commit recorded after `since` may have changed a row `watched` answers true for. */
  readonly touchedSince: (since: number, watched: (effectId: string) => boolean) => boolean
}

export const make = (): OutboxTouches => {
  let newest = 0
  // Ring buffer of the last KEPT commits: slot (mark % KEPT) holds that mark's rows.
  const slots: Array<ReadonlyArray<string> | undefined> = new Array(KEPT).fill(undefined)
  return {
    record: (effectIds) => {
      newest++
      slots[newest % KEPT] = effectIds
    },
    mark: () => newest,
    touchedSince: (since, watched) => {
      if (since >= newest) return false
      if (newest - since > KEPT) return true
      for (let mark = since + 1; mark <= newest; mark++) {
        const ids = slots[mark % KEPT]
        if (ids === undefined) return true
        for (const id of ids) if (watched(id)) return true
      }
      return false
    }
  }
}
