/**
 * Claims at commit. A batch that wrote outbox rows (or settled one, which may free the next row of its
 * lane) claims due rows for this process's reactors that have free slots, inside its own transaction:
 * the claim commits with the rows that announce the effects, and the handlers start right after that
 * commit. Without it a row took two commits before its handler ran (the batch's, then the reactor's
 * claim: on SQLite a second fsync, which was most of the pickup time, docs/benchmarks.md), plus the
 * reactor's wake-up and step in between.
 *
 * The contract is unchanged: the claim is the same conditional UPDATE the reactor runs (lanes in order,
 * due rows only, a lease for this owner), and nothing starts before the COMMIT that holds both the row
 * and its claim (intent before effect). A rolled-back batch claimed nothing: its slots are given back.
 * A crash between the commit and the handler's start leaves a row running under a dead owner's lease,
 * as a crash after a reactor's own claim does, and boot reconcile retires it by its kind's policy. So
 * reactors offer only their always replay-safe kinds here (requeued: it runs once after the restart);
 * a process-bound row would be failed as "may or may not have taken effect" although it never started,
 * so those keep the reactor's own claim (test/reactor-crash.test.ts kills a process at that instant).
 *
 * On a shared store (PostgreSQL) a row of the same lane may sit in another transaction not yet
 * committed, invisible to this one, so the lane check could not see it. There the batch first takes the
 * schema's writers' lock exclusively if no other writer holds it (StoreBackend.claimAlone), keeping new
 * writers out until its COMMIT; then every lower sequence is visible to the claim. Otherwise it claims
 * nothing, and the reactors claim at or below the commit horizon, as before.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, type Scope } from "effect"
import * as Outbox from "./Outbox.js"
import { type AloneTops, StoreBackend } from "./storage/StoreBackend.js"

/** A reactor that takes rows claimed for it by a commit. */
export interface Claimer {
  readonly name: string
  readonly kinds: ReadonlyArray<string>
  readonly owner: string
  readonly leaseMs: number
  /**
   * Reserves up to its free slots for a claim now and says how many (0: none free, not active yet,
   * or stopping). Synchronous: a reservation is held until `deliver` or
   * `unreserve`, so the reactor's own claims and this one never take more rows than its concurrency.
   */
  readonly reserve: () => number
  /** Gives back reserved slots that were not filled (fewer rows claimed, or the batch rolled back). */
  readonly unreserve: (slots: number) => void
  /**
   * Rows claimed for it by a batch that failed, or that could not start: their slots, and the rows
   * (back to pending, conditionally on the claim: a no-op after a rollback).
   */
  readonly giveBack: (rows: ReadonlyArray<Outbox.OutboxRow>) => Effect.Effect<void>
  /** Starts the performances of rows claimed for it by a committed batch; each fills one reserved slot. */
  readonly deliver: (
    rows: ReadonlyArray<Outbox.OutboxRow>,
    /** The engine's touches mark taken before the batch began (CancelWatch.watch's `since`). */
    since: number
  ) => Effect.Effect<void>
  /**
   * Present when every kind the reactor performs is offered here, so a claim at commit can be a full
   * look for it. Told after a committed batch whose claim left nothing claimable unclaimed
   * (Outbox.claimWithNextDue's `more` is false): no claim of the reactor's own can find a row until the outbox touches
   * move past `mark` (another commit, local or foreign, or a direct write that may free a row) or until
   * `due` (the earliest pending row of its kinds due after the claim's instant; undefined: none). The
   * reactor's step after that commit then spares its claim (Reactor.ts): on PostgreSQL the claim was
   * one statement in ten of the end-to-end path, nearly always claiming nothing.
   */
  readonly covered?: (mark: number, due: number | undefined) => void
}

/** Rows one batch claimed for one reactor: delivered after its commit, given back if it rolls back. */
export interface Handoff {
  readonly claimer: Claimer
  readonly rows: ReadonlyArray<Outbox.OutboxRow>
  /**
   * For a claimer with `covered`: the claim left nothing claimable unclaimed in this transaction (see
   * `covered`). `due`: its next due time, read with the claim.
   */
  readonly complete?: { readonly due: number | undefined }
}

export interface CommitClaims {
  /** Whether any reactor is registered: the engine asks for claims (and reads the storage guard) only then. */
  readonly active: () => boolean
  /** Registers a reactor for the life of the caller's scope. */
  readonly register: (claimer: Claimer) => Effect.Effect<void, never, Scope.Scope>
  /**
   * Inside a batch's transaction, after its writes: claims due rows for each reactor with free slots,
   * adding what it claimed to `into` (the caller delivers it after the commit, or releases it).
   * Answers what StoreBackend.claimAlone saw when the batch is the store's only writer until its
   * COMMIT (only then does it claim), undefined otherwise.
   */
  readonly claim: (now: number, into: Array<Handoff>) => Effect.Effect<AloneTops | undefined, SqlError, SqlClient>
}

export const make = (): CommitClaims => {
  const claimers = new Set<Claimer>()
  return {
    active: () => claimers.size > 0,
    register: (claimer) =>
      Effect.acquireRelease(
        Effect.sync(() => claimers.add(claimer)),
        () => Effect.sync(() => claimers.delete(claimer))
      ).pipe(Effect.asVoid),
    claim: (now, into) =>
      Effect.flatMap(StoreBackend, (backend) => backend.claimAlone).pipe(
        Effect.flatMap((alone) =>
          alone !== undefined ? Effect.as(claimEach(now, into), alone) : Effect.succeed(alone)
        )
      )
  }
  function claimEach(now: number, into: Array<Handoff>) {
    return Effect.forEach(
      [...claimers],
      (claimer) => {
        const slots = claimer.reserve()
        if (slots <= 0) return Effect.void
        const request = {
          kinds: claimer.kinds,
          owner: claimer.owner,
          now,
          leaseMs: claimer.leaseMs,
          limit: slots,
          after: 0
        }
        // A claimer that can be covered gets its next due time and whether the claim was complete with
        // it (one statement on PostgreSQL, a second read on SQLite's in-process connection).
        const claimed =
          claimer.covered === undefined
            ? Effect.map(Outbox.claim(request), (rows) => ({ rows, complete: undefined }))
            : Effect.map(Outbox.claimWithNextDue(request), (read) => ({
                rows: read.claimed,
                complete: read.more ? undefined : { due: read.due }
              }))
        return claimed.pipe(
          Effect.onExit((exit) =>
            Effect.sync(() => {
              const rows = exit._tag === "Success" ? exit.value.rows : []
              claimer.unreserve(slots - rows.length)
              const complete = exit._tag === "Success" ? exit.value.complete : undefined
              if (rows.length > 0 || complete !== undefined)
                into.push({ claimer, rows, ...(complete !== undefined && { complete }) })
            })
          )
        )
      },
      { discard: true }
    )
  }
}

/**
 * The batch failed: its slots go back, and so do its rows, in case its COMMIT failed ambiguously (the
 * connection lost while the server committed): they would otherwise stay running under this live
 * owner, whom no peer reclaims from, until it stops. The hand-back is conditional on the claim (status,
 * attempt, owner), so after a real rollback it changes nothing; and the rows never started.
 */
export const abandon = (handoffs: ReadonlyArray<Handoff>): Effect.Effect<void> =>
  Effect.forEach(handoffs, (h) => h.claimer.giveBack(h.rows), { discard: true })

/** The batch committed: each reactor starts its rows. */
export const deliver = (handoffs: ReadonlyArray<Handoff>, since: number): Effect.Effect<void> =>
  Effect.forEach(handoffs, (h) => (h.rows.length > 0 ? h.claimer.deliver(h.rows, since) : Effect.void), {
    discard: true
  })

/**
 * After the commit's outbox ring recorded `mark`, with nothing recorded between the batch's start and
 * it: each reactor whose claim here was complete is told it is covered up to that mark.
 */
export const cover = (handoffs: ReadonlyArray<Handoff>, mark: number): void => {
  for (const h of handoffs) if (h.complete !== undefined) h.claimer.covered?.(mark, h.complete.due)
}
