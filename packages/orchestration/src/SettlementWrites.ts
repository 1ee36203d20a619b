/**
 * The settlements of a batch, decided at once and written together: one statement (or, on SQLite's
 * raw connection, one prepared statement run in one synchronous loop) per table for the whole run,
 * instead of one command's Effect steps and writes each. Boot reconcile settles thousands of rows
 * this way, and a reactor's outcomes that arrive together share their writes the same way.
 *
 * The rules are the front door's, unchanged: each settlement is checked against its row as the
 * batch has left it (a stale one is rejected and gets its rejected receipt), the owning aggregate is
 * told through `onOutcome` and its events are appended, every command gets its receipt, and the row
 * change goes into the batch's SettlementPage. Anything this path does not do alone goes the
 * general way (`decideAndWrite`), after the run so far is written, so the log keeps the batch's
 * order: an operator's action (it reads the lease holder's liveness), a settlement whose aggregate
 * decides effects, cancels or timers, a throw from domain code (the general path turns it into the
 * command's defect), an aggregate not in memory. Only for a batch without savepoints: a write that
 * fails fails the whole transaction, so nothing of the run is kept unless all of it is.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { Decision, type Rejection } from "./Aggregate.js"
import type { AggregateState } from "./AggregateStates.js"
import {
  type BatchEnv,
  type DeferredRows,
  decideContext,
  evolveAndEncode,
  newEventsOf,
  rejectionReceipt,
  writeDeferred
} from "./CommandWrite.js"
import { decideSettlement } from "./EffectOutcomes.js"
import { CommandDefect } from "./Errors.js"
import type * as EventLog from "./EventLog.js"
import * as Outbox from "./Outbox.js"
import type { CommandResult, ProcessorDeps, QueuedCommand } from "./Processor.js"
import type * as Receipts from "./Receipts.js"
import type * as SettlementPage from "./SettlementPage.js"

/** One settlement decided and waiting for the run's writes; `index` is its place in the batch. */
type Decided =
  | {
      readonly _tag: "Accepted"
      readonly index: number
      readonly identity: Receipts.CommandIdentity
      readonly now: number
      readonly events: ReadonlyArray<unknown>
      readonly newEvents: ReadonlyArray<EventLog.NewEvent>
      readonly state: AggregateState
    }
  | {
      readonly _tag: "Stale"
      readonly index: number
      readonly identity: Receipts.CommandIdentity
      readonly now: number
      readonly rejection: Rejection
    }

/** What a written run gives the batch: answers by place, and the log head after it. */
export interface WrittenRun {
  readonly answers: ReadonlyArray<{ readonly index: number; readonly result: CommandResult }>
  readonly head: number
}

export interface SettlementWrites {
  /**
   * Decides a settlement against the page's row and the aggregate's current state and adds it to the
   * run, answering the aggregate's state after it; or answers undefined: the command goes the
   * general way (write the run first).
   */
  readonly decide: (
    index: number,
    item: QueuedCommand,
    current: AggregateState,
    now: number
  ) => AggregateState | undefined
  /** Whether the run holds settlements not written yet. */
  readonly pending: () => boolean
  /**
   * Writes the run: its events in one append, the projections that read them, its receipts in one
   * insert. The row changes are in the page, which the batch writes (SettlementPage.flush).
   */
  readonly write: (
    deps: ProcessorDeps,
    env: BatchEnv,
    head: number
  ) => Effect.Effect<WrittenRun, SqlError | CommandDefect, SqlClient>
}

/** A decided settlement as the rows of a deferred run (CommandWrite.writeDeferred): the same receipt either way. */
const deferredRows = (d: Decided): DeferredRows =>
  d._tag === "Stale"
    ? {
        index: d.index,
        identity: d.identity,
        rows: { events: [], effects: [], receipt: rejectionReceipt(d.identity, d.rejection, 0, d.now) },
        events: [],
        rejection: d.rejection
      }
    : {
        index: d.index,
        identity: d.identity,
        rows: {
          events: d.newEvents,
          effects: [],
          receipt: { ...d.identity, status: "accepted", effectIds: [], rejection: null, acceptedAt: d.now }
        },
        events: d.events,
        rejection: undefined
      }

/** A decision this path writes alone: events only (no effects, cancels or timers). */
const eventsOnly = (decision: Decision<any>) =>
  decision.effects.length === 0 &&
  decision.cancel.length === 0 &&
  decision.timers === undefined &&
  decision.cancelTimers === undefined

export const make = (page: SettlementPage.SettlementPage): SettlementWrites => {
  let run: Array<Decided> = []

  const decide = (
    index: number,
    item: QueuedCommand,
    current: AggregateState,
    now: number
  ): AggregateState | undefined => {
    const command = item.settlement
    if (command === undefined || command.type === "effect.retry" || command.type === "effect.cancel") return undefined
    const known = page.peek(command.effectId)
    if (known === undefined) return undefined
    const { aggregate, identity } = item
    const verdict = decideSettlement(known.row && Outbox.toTarget(known.row, undefined), command, now)
    if (verdict._tag === "Refused") return undefined
    if (verdict._tag === "Stale") {
      run.push({ _tag: "Stale", index, identity, now, rejection: Decision.reject("stale-outcome", verdict.message) })
      return current
    }
    let decision: Decision<any> | Rejection = Decision.none()
    if (aggregate.onOutcome !== undefined) {
      try {
        decision = aggregate.onOutcome(current.state, verdict.outcome, decideContext(identity, now))
      } catch {
        // The general path decides it again and answers the throw as the command's defect.
        return undefined
      }
    }
    // An aggregate may decline to record an outcome; the row settles all the same.
    if (decision._tag === "Rejection") decision = Decision.none()
    if (!eventsOnly(decision)) return undefined
    const evolved = evolveAndEncode(item, current, decision.events)
    if (evolved instanceof CommandDefect) return undefined
    page.stage(command.effectId, verdict.outcome.attempt, verdict.change, now)
    page.keep()
    const state = { state: evolved.state, version: current.version + decision.events.length }
    run.push({
      _tag: "Accepted",
      index,
      identity,
      now,
      events: decision.events,
      newEvents: newEventsOf(item, current, evolved.encoded, now),
      state
    })
    return state
  }

  const write = (deps: ProcessorDeps, env: BatchEnv, head: number) =>
    Effect.gen(function* () {
      const decided = run
      run = []
      // The run's events and receipts together (CommitWriter.writeCommands: one statement on
      // PostgreSQL), then its projections, as a run of pure commands is written.
      return yield* writeDeferred(deps, env, decided.map(deferredRows), head)
    })

  return { decide, pending: () => run.length > 0, write }
}
