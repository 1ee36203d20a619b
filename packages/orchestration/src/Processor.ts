/**
 * The single writer. It takes queued commands in batches and commits each batch in ONE transaction
 * (group commit): per command a receipt lookup, the pure decision, then events, projections, outbox
 * rows and the receipt, each command under its own savepoint so a rejection or a defect stays its
 * own. A storage error is different: SQLite may have rolled back the whole transaction, so the batch
 * is abandoned and its commands are re-run one per transaction. A projection's constraint violation
 * is not a storage error: it is the command's defect, rolled back to its savepoint like any other.
 * Nothing is answered before COMMIT.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Cause, Effect, Exit, Option } from "effect"
import { Decision, type AnyAggregate, type DecideContext, type Rejection } from "./Aggregate.js"
import { keyOf, type AggregateState, type AggregateStates } from "./AggregateStates.js"
import {
  type AggregateUnavailable,
  type CommandDefect,
  CommandRejected,
  EffectActionRefused,
  StorageFailure,
  type DispatchError
} from "./Errors.js"
import { decideSettlement, type SettlementCommand } from "./EffectOutcomes.js"
import { FaultPoints } from "./FaultPoints.js"
import * as Outbox from "./Outbox.js"
import * as Owners from "./Owners.js"
import type { Projection } from "./Projection.js"
import type * as Receipts from "./Receipts.js"
import * as SettlementPage from "./SettlementPage.js"
import { answerFromReceipt, type DispatchAnswer } from "./StoredAnswers.js"
import { StorageFaults } from "./storage/StorageFaults.js"
import { StoreBackend } from "./storage/StoreBackend.js"
import type { CommitWriter } from "./storage/CommitWriter.js"
import { hasSqlError, writeTransaction } from "./storage/Transactions.js"
import { type BatchEnv, commandDefect, decideAndWrite } from "./CommandWrite.js"

export { type DispatchAnswer, storedAnswer } from "./StoredAnswers.js"

/**
 * How a queued command reaches its decision, given the aggregate's current state. An operator's
 * action may instead be refused: nothing is written, not even a receipt (EffectActionRefused).
 */
export type Decide = (
  state: unknown,
  ctx: DecideContext,
  page: SettlementPage.SettlementPage
) => Effect.Effect<Decision<any> | Rejection | EffectActionRefused, SqlError | CommandDefect, SqlClient>

/** A decoded command waiting for the processor. */
export interface QueuedCommand {
  readonly identity: Receipts.CommandIdentity
  readonly aggregate: AnyAggregate
  readonly decide: Decide
  /** Settlements change outbox rows, so reactors are rung after their commit. */
  readonly settles: boolean
  /**
   * Reads its effect's row through the batch's SettlementPage and changes outbox rows only through
   * it (a stream chunk whose aggregate projects none): the page is not written before it, and its
   * row is read with its run's. Settlements always do.
   */
  readonly throughPage?: boolean
  /** A settlement's (or page-reading chunk's) row, read with the others of its run (SettlementPage.ts). */
  readonly effectId?: string
}

const readsPage = (item: QueuedCommand): boolean => item.settles || item.throughPage === true

export { commandDefect } from "./CommandWrite.js"

/** The decision of a domain command: the aggregate's pure decider. */
export const decideCommand =
  (aggregate: AnyAggregate, identity: Receipts.CommandIdentity, command: unknown): Decide =>
  (state, ctx) =>
    Effect.try({
      try: () => aggregate.decide(state, command, ctx),
      catch: (error) => commandDefect(identity, "decide", error)
    })

/**
 * The decision of a settlement: check it against the row as it is now (a settle that lost its lease
 * is stale and changes nothing), let the owning aggregate record the outcome, and update the row.
 * An operator's action that the row's state (or, for a retry, the owning aggregate) does not allow
 * is refused without a receipt, so it never answers for a later request under the same id.
 */
export const decideSettlementCommand =
  (aggregate: AnyAggregate, identity: Receipts.CommandIdentity, command: SettlementCommand): Decide =>
  (state, ctx, page) =>
    Effect.gen(function* () {
      const operator = command.type === "effect.retry" || command.type === "effect.cancel"
      const refuse = (reason: EffectActionRefused["reason"], message: string) =>
        new EffectActionRefused({
          commandId: identity.commandId,
          effectId: command.effectId,
          action: command.type === "effect.retry" ? "retry" : "cancel",
          reason,
          message
        })
      const row = yield* page.find(command.effectId)
      // Whether a cancelled performance may still run depends on its lease owner's liveness.
      const holder = operator && row?.leaseOwner != null ? yield* Owners.ownerLiveness(row.leaseOwner) : undefined
      const verdict = decideSettlement(row && Outbox.toTarget(row, holder), command, ctx.now)
      if (verdict._tag === "Stale") return Decision.reject("stale-outcome", verdict.message)
      if (verdict._tag === "Refused") return refuse(verdict.reason, verdict.message)
      // The aggregate decides first (pure), so an operator retry it refuses changes nothing.
      let decision: Decision<any> | Rejection = Decision.none()
      if (aggregate.onOutcome !== undefined) {
        decision = yield* Effect.try({
          try: () => aggregate.onOutcome!(state, verdict.outcome, ctx),
          catch: (error) => commandDefect(identity, "decide", error)
        })
      }
      if (decision._tag === "Rejection") {
        if (command.type === "effect.retry") return refuse("refused-by-owner", decision.message)
        decision = Decision.none()
      }
      yield* page.apply(command.effectId, verdict.outcome.attempt, verdict.change, ctx.now)
      return decision
    })

export type CommandResult = Exit.Exit<DispatchAnswer, DispatchError>

interface BatchOutcome {
  readonly results: ReadonlyArray<CommandResult>
  readonly states: ReadonlyMap<string, AggregateState>
  readonly head: number
}

export interface ProcessorDeps {
  readonly states: AggregateStates
  readonly projections: ReadonlyArray<Projection>
  /** The committed log head; the processor advances it after each commit. */
  readonly head: { value: number }
  /** The batch's own writes: the SQLite store's raw-connection writer, or the generic one. */
  readonly writer: CommitWriter
}

const isStorageCause = (cause: Cause.Cause<unknown>) => hasSqlError(cause)

/**
 * A command of an optimistic batch failed (a defect, a quarantined aggregate) after the batch ran
 * without savepoints: whatever it wrote must go, so the whole transaction is rolled back and the
 * batch runs again with a savepoint per command.
 */
class NeedsIsolation {
  readonly _tag = "NeedsIsolation"
  constructor(readonly cause: Cause.Cause<CommandDefect | AggregateUnavailable>) {}
}

/**
 * One transaction for the whole batch. Fails only with a StorageFailure, or (optimistic mode) with
 * NeedsIsolation. Optimistic mode runs the commands without savepoints: two statements (two round
 * trips on PostgreSQL) fewer per command; correct because a batch in which every command succeeds
 * or is rejected (a rejection writes only its receipt) commits exactly what isolated commands would.
 */
const commitBatch = (deps: ProcessorDeps, items: ReadonlyArray<QueuedCommand>, isolate: boolean) =>
  writeTransaction(
    "dispatch",
    Effect.gen(function* () {
      // Shared store (PostgreSQL): take the append lock, then forget cached state another process
      // made stale. After this, receipts and versions read below cannot change under the batch.
      const commandIds = items.map((i) => i.identity.commandId)
      const start = yield* (yield* StoreBackend).beginBatch(deps.head.value, commandIds)
      if (start.foreign !== undefined) {
        for (const a of start.foreign.aggregates) deps.states.drop(keyOf(a.aggregateType, a.aggregateId))
        deps.head.value = Math.max(deps.head.value, start.foreign.head)
      }
      const receipts = start.receipts ?? (yield* deps.writer.findReceipts(commandIds))
      const fresh = items.filter((i) => !receipts.has(i.identity.commandId))
      // Cold aggregates in one read per type, before the batch writes anything (committed state only).
      yield* deps.states.preload(fresh.map((i) => ({ aggregate: i.aggregate, aggregateId: i.identity.aggregateId })))
      const page = SettlementPage.make()
      const env: BatchEnv = {
        page,
        faults: Option.getOrUndefined(yield* Effect.serviceOption(StorageFaults)),
        clock: yield* Effect.clock
      }
      const states = new Map<string, AggregateState>()
      let head = deps.head.value
      const results: Array<CommandResult> = []
      // Items before this index have had their rows read (or were not settlements).
      let readUpTo = 0
      for (const [index, item] of items.entries()) {
        const stored = receipts.get(item.identity.commandId)
        if (stored !== undefined) {
          results.push(yield* answerFromReceipt(stored, item.identity))
          continue
        }
        if (!readsPage(item)) {
          // Not a settlement: it may read or write outbox rows, so the page is written first.
          yield* page.flush
        } else if (index >= readUpTo) {
          // The rows of this run of settlements (and chunks reading through the page), in one read.
          const run: Array<string> = []
          for (readUpTo = index; readUpTo < items.length && readsPage(items[readUpTo]!); readUpTo++) {
            const effectId = items[readUpTo]!.effectId
            if (effectId !== undefined && !receipts.has(items[readUpTo]!.identity.commandId)) run.push(effectId)
          }
          yield* page.prefetch(run)
        }
        const key = keyOf(item.identity.aggregateType, item.identity.aggregateId)
        const body = Effect.suspend(() => {
          // The batch's own newer state first, then the committed cache, then a replay.
          const current = states.get(key) ?? deps.states.cached(key)
          return current !== undefined
            ? decideAndWrite(deps, env, item, current, head)
            : Effect.flatMap(deps.states.load(item.aggregate, item.identity.aggregateId), (loaded) =>
                decideAndWrite(deps, env, item, loaded, head)
              )
        })
        const exit = isolate ? yield* deps.writer.savepoint(body, isStorageCause) : yield* Effect.exit(body)
        if (!isolate && Exit.isFailure(exit)) {
          if (isStorageCause(exit.cause)) return yield* Effect.failCause(exit.cause)
          return yield* Effect.fail(new NeedsIsolation(exit.cause as Cause.Cause<CommandDefect | AggregateUnavailable>))
        }
        if (Exit.isFailure(exit)) {
          page.drop()
          results.push(Exit.failCause(exit.cause as Cause.Cause<CommandDefect | AggregateUnavailable>))
        } else if (exit.value instanceof CommandRejected || exit.value instanceof EffectActionRefused) {
          page.drop()
          results.push(Exit.fail(exit.value))
        } else {
          page.keep()
          states.set(key, exit.value.state)
          head = exit.value.answer.sequence
          results.push(Exit.succeed(exit.value.answer))
        }
      }
      yield* page.flush
      yield* (yield* FaultPoints).hit("dispatch.before-commit")
      return { results, states, head } satisfies BatchOutcome
    })
  )

/**
 * Processes one batch to an answer per command, in order. Never fails: every failure is an answer.
 * Storage failures abandon the batch and re-run its commands alone, so each gets its own answer.
 */
export const processBatch = (
  deps: ProcessorDeps,
  items: ReadonlyArray<QueuedCommand>,
  onAbandoned: () => void,
  isolate = false
): Effect.Effect<ReadonlyArray<CommandResult>, never, SqlClient> =>
  commitBatch(deps, items, isolate).pipe(
    Effect.map((outcome) => {
      for (const [key, state] of outcome.states) deps.states.set(key, state)
      deps.head.value = outcome.head
      return outcome.results
    }),
    Effect.catchAll((failure): Effect.Effect<ReadonlyArray<CommandResult>, never, SqlClient> => {
      for (const item of items) deps.states.drop(keyOf(item.identity.aggregateType, item.identity.aggregateId))
      if (failure instanceof NeedsIsolation) {
        // Alone, the rollback already isolated it: its failure is its answer and nothing was written.
        if (items.length === 1) return Effect.succeed([Exit.failCause(failure.cause)])
        return processBatch(deps, items, onAbandoned, true)
      }
      if (items.length === 1) return Effect.succeed([Exit.fail(failure)])
      onAbandoned()
      return Effect.forEach(items, (item) => processBatch(deps, [item], onAbandoned).pipe(Effect.map((r) => r[0]!)))
    }),
    Effect.catchAllCause((cause) => {
      // A bug of ours, not the store's: every command of the batch fails visibly, none is answered accepted.
      const failure = new StorageFailure({
        reason: "unknown",
        code: "ENGINE_DEFECT",
        operation: "dispatch",
        message: `dispatch failed unexpectedly: ${Cause.pretty(cause)}`
      })
      for (const item of items) deps.states.drop(keyOf(item.identity.aggregateType, item.identity.aggregateId))
      return Effect.succeed(items.map(() => Exit.fail(failure)))
    })
  )
