/**
 * The single writer. It takes queued commands in batches and commits each batch in ONE transaction
 * (group commit): the batch's receipts read at once, then per command the pure decision, events,
 * projections, outbox rows and the receipt. A batch first runs optimistically, without savepoints:
 * runs of pure commands are decided at once and written together (deferred runs, CommitWriter.
 * writeCommands), settlements likewise (SettlementWrites). If a command fails after writing (a
 * defect, a projection's constraint violation), the batch runs again with a savepoint per command so
 * the failure stays that command's. A storage error is different: SQLite may have rolled back the
 * whole transaction, so the batch is abandoned and its commands are re-run one per transaction.
 * Nothing is answered before COMMIT.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Cause, Effect, Exit, Option } from "effect"
import { Decision, type AnyAggregate, type DecideContext, type Rejection } from "./Aggregate.js"
import { keyOf, type AggregateState, type AggregateStates } from "./AggregateStates.js"
import {
  type AggregateUnavailable,
  CommandDefect,
  CommandRejected,
  EffectActionRefused,
  StorageFailure,
  type DispatchError
} from "./Errors.js"
import { decideSettlement, type SettlementCommand } from "./EffectOutcomes.js"
import * as CommitClaims from "./CommitClaims.js"
import { FaultPoints } from "./FaultPoints.js"
import * as Outbox from "./Outbox.js"
import * as Owners from "./Owners.js"
import type { Projection } from "./Projection.js"
import type * as Receipts from "./Receipts.js"
import type { StreamChunk } from "./StreamChunks.js"
import type { StreamTailsShape } from "./StreamTails.js"
import * as SettlementPage from "./SettlementPage.js"
import * as SettlementWrites from "./SettlementWrites.js"
import { answerFromReceipt, type DispatchAnswer } from "./StoredAnswers.js"
import { StorageFaults } from "./storage/StorageFaults.js"
import { type AloneTops, type CachedVersion, StoreBackend } from "./storage/StoreBackend.js"
import type { CommitWriter } from "./storage/CommitWriter.js"
import { isLostRace } from "./storage/StorageErrors.js"
import { hasSqlError, writeTransaction } from "./storage/Transactions.js"
import * as CommandWrite from "./CommandWrite.js"
import { type BatchEnv, commandDefect, decideAndWrite, type Touched } from "./CommandWrite.js"

export { type DispatchAnswer, storedAnswer } from "./StoredAnswers.js"

/**
 * How a queued command reaches its decision, given the aggregate's current state. An operator's
 * action may instead be refused: nothing is written, not even a receipt (EffectActionRefused). So
 * may an engine-internal command that came too early (a CommandRejected returned as it is: a
 * stream chunk decided before the chunk it follows landed), so the same command is decided again
 * when it is sent again.
 */
export type Decide = (
  state: unknown,
  ctx: DecideContext,
  page: SettlementPage.SettlementPage,
  /** Stream chunks this command appends go here too (StreamTails learns them once the batch commits). */
  appended: Array<StreamChunk>
) => Effect.Effect<
  Decision<any> | Rejection | EffectActionRefused | CommandRejected,
  SqlError | CommandDefect,
  SqlClient
>

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
  /** A settlement as decoded, so its batch can decide it at once and write it with others (SettlementWrites.ts). */
  readonly settlement?: SettlementCommand
  /**
   * Its decision reads nothing but the aggregate's state (a domain command): where the store writes
   * several commands in one statement, its rows may wait for the others of its run (deferred runs).
   */
  readonly pure?: boolean
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
  /** The stream chunks the batch appended, in order. */
  readonly appended: ReadonlyArray<StreamChunk>
  /** Whether a command of the batch scheduled or cancelled timers. */
  readonly timers: boolean
  /** The rows its decisions cancelled (OutboxTouches: a running row's performer must look). */
  readonly cancels: ReadonlyArray<string>
}

export interface ProcessorDeps {
  readonly states: AggregateStates
  readonly projections: ReadonlyArray<Projection>
  /** The committed log head; the processor advances it after each commit. */
  readonly head: { value: number }
  /** The batch's own writes: the SQLite store's raw-connection writer, or the generic one. */
  readonly writer: CommitWriter
  /** Told the chunks each committed batch appended, and the effects it settled (none: no tails). */
  readonly tails?: StreamTailsShape
  /** Filled by each committed batch: timers scheduled or cancelled, rows cancelled (the engine's hints). */
  readonly touched?: Touched
  /**
   * Claims for this process's idle reactors made inside the batch's transaction (CommitClaims.ts). What
   * a committed batch claimed goes to `handoffs`.
   */
  readonly claims?: ProcessorClaims
}

/** A batch's claims at commit (CommitClaims.ts), and what its committed run learned. */
export interface ProcessorClaims {
  readonly commitClaims: CommitClaims.CommitClaims
  readonly handoffs: Array<CommitClaims.Handoff>
  /** Set by the run that committed: what it saw as the store's only writer until its COMMIT, if it was. */
  alone?: AloneTops | undefined
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
 * The batch's claim for idle reactors failed (the store refused the UPDATE, or a bug): nothing of the
 * batch committed, and it runs again without that claim, so an optional claim never fails a command
 * that commits without it. The reactors claim on their own, as they would have without claims at commit.
 */
class ClaimRefused {
  readonly _tag = "ClaimRefused"
  constructor(readonly cause: Cause.Cause<unknown>) {}
}

/**
 * One transaction for the whole batch. Fails only with a StorageFailure, or (optimistic mode) with
 * NeedsIsolation. Optimistic mode runs the commands without savepoints: two statements (two round
 * trips on PostgreSQL) fewer per command; correct because a batch in which every command succeeds
 * or is rejected (a rejection writes only its receipt) commits exactly what isolated commands would.
 */
const commitBatch = (deps: ProcessorDeps, items: ReadonlyArray<QueuedCommand>, isolate: boolean, claim: boolean) =>
  Effect.suspend(() => {
    // What this run claims for idle reactors: delivered once it commits, given back if it does not.
    const run: ClaimRun = { handoffs: [], alone: undefined }
    return writeBatch(deps, items, isolate, claim ? run : undefined).pipe(
      Effect.onExit((exit) => {
        if (exit._tag !== "Success") return CommitClaims.abandon(run.handoffs)
        // Only a run with claims (deps.claims set) has handoffs or an answer from claimAlone.
        if (deps.claims !== undefined) {
          deps.claims.alone = run.alone
          deps.claims.handoffs.push(...run.handoffs)
        }
        return Effect.void
      })
    )
  })

/** What one run of a batch claimed at commit, and whether it was then the store's only writer. */
interface ClaimRun {
  readonly handoffs: Array<CommitClaims.Handoff>
  alone: AloneTops | undefined
}

/** Whether a committed answer may have made a row claimable: it wrote effect rows, or settled one (freeing its lane). */
const mayHaveMadeClaimable = (items: ReadonlyArray<QueuedCommand>, results: ReadonlyArray<CommandResult>) =>
  results.some((result, index) => {
    if (result === undefined || Exit.isFailure(result) || result.value.duplicate) return false
    return result.value.effectIds.length > 0 || items[index]!.settles
  })

const writeBatch = (
  deps: ProcessorDeps,
  items: ReadonlyArray<QueuedCommand>,
  isolate: boolean,
  claimRun: ClaimRun | undefined
) =>
  writeTransaction(
    "dispatch",
    Effect.gen(function* () {
      // Shared store (PostgreSQL): the transaction's id first, then forget cached state another
      // process made stale. Another writer may still commit a receipt or a version before this batch
      // does: the unique constraints refuse this batch's, and processBatch runs it again (isLostRace).
      const commandIds = items.map((i) => i.identity.commandId)
      const backend = yield* StoreBackend
      const cached: Array<CachedVersion> = []
      if (backend.shared) {
        const seen = new Set<string>()
        for (const { identity } of items) {
          const key = keyOf(identity.aggregateType, identity.aggregateId)
          const state = seen.has(key) ? undefined : deps.states.cached(key)
          seen.add(key)
          if (state !== undefined) {
            cached.push({
              aggregateType: identity.aggregateType,
              aggregateId: identity.aggregateId,
              version: state.version
            })
          }
        }
      }
      const start = yield* backend.beginBatch(cached, commandIds)
      for (const a of start.stale) deps.states.drop(keyOf(a.aggregateType, a.aggregateId))
      if (start.head !== undefined) deps.head.value = Math.max(deps.head.value, start.head)
      const receipts = start.receipts ?? (yield* deps.writer.findReceipts(commandIds))
      const fresh = items.filter((i) => !receipts.has(i.identity.commandId))
      // Cold aggregates in one read per type, before the batch writes anything (committed state only).
      yield* deps.states.preload(fresh.map((i) => ({ aggregate: i.aggregate, aggregateId: i.identity.aggregateId })))
      const page = SettlementPage.make()
      const env: BatchEnv = {
        page,
        appended: [],
        touched: { timers: false, cancels: [] },
        faults: Option.getOrUndefined(yield* Effect.serviceOption(StorageFaults)),
        clock: yield* Effect.clock
      }
      // Without savepoints, settlements are decided at once and written together (SettlementWrites.ts).
      const settlements = isolate ? undefined : SettlementWrites.make(page)
      // One time for the run's settlements, so rows settled alike share one UPDATE (Outbox.applyChanges).
      const batchNow = env.clock.unsafeCurrentTimeMillis()
      const states = new Map<string, AggregateState>()
      let head = deps.head.value
      const results: Array<CommandResult> = new Array(items.length)
      // Deferred runs: consecutive pure commands are decided at once and their rows written together
      // (CommitWriter.writeCommands: on PostgreSQL one statement for the run's events, outbox rows and
      // receipts; on SQLite one synchronous loop), then the run's projections. Only without
      // savepoints: a command of the run that fails after its decision sends the batch to its re-run
      // with savepoints, where every command writes alone. A batch of one has nothing to group.
      const deferring = !isolate && items.length > 1
      // A written run's answers, and the head after it. Its write failing fails the transaction: a
      // storage failure as it is, anything else (a projection's defect) as NeedsIsolation.
      const takeAnswers = (written: SettlementWrites.WrittenRun) =>
        Effect.sync(() => {
          for (const answer of written.answers) results[answer.index] = answer.result
          head = written.head
        })
      const runFailure = (
        cause: Cause.Cause<SqlError | CommandDefect>
      ): Effect.Effect<never, SqlError | NeedsIsolation> =>
        isStorageCause(cause)
          ? Effect.failCause(cause as Cause.Cause<SqlError>)
          : Effect.fail(new NeedsIsolation(cause as Cause.Cause<CommandDefect>))
      const pending: Array<CommandWrite.Deferred> = []
      const writePending = Effect.suspend(
        (): Effect.Effect<void, SqlError | NeedsIsolation, SqlClient> =>
          pending.length === 0
            ? Effect.void
            : Effect.flatMap(CommandWrite.writeDeferred(deps, env, pending.splice(0), head), takeAnswers).pipe(
                Effect.catchAllCause(runFailure)
              )
      )
      // A pure command of a deferred run: decided now, its rows written with its run's.
      type DeferOrWrite = Effect.Effect<
        CommandWrite.Deferred | CommandWrite.Written | CommandRejected | EffectActionRefused,
        SqlError | CommandDefect | NeedsIsolation,
        SqlClient
      >
      const deferOrWrite = (item: QueuedCommand, index: number, current: AggregateState): DeferOrWrite =>
        Effect.flatMap(CommandWrite.decide(env, item, current), ({ decision, now }): DeferOrWrite => {
          if (decision instanceof EffectActionRefused || decision instanceof CommandRejected) {
            return Effect.succeed(decision)
          }
          const deferred = CommandWrite.deferrable(index, item, current, decision, now)
          if (deferred instanceof CommandDefect) return Effect.fail(deferred)
          if (deferred !== undefined) return Effect.succeed(deferred)
          // It writes other tables too (cancels, timers): the run so far first, then this one at once.
          return Effect.zipRight(
            writePending,
            Effect.suspend(() => CommandWrite.writeDecided(deps, env, item, current, head, decision, now))
          )
        })
      // The run's writes go out before any other command writes, so the log keeps the batch's order.
      const writeRun = Effect.suspend(
        (): Effect.Effect<void, SqlError | NeedsIsolation, SqlClient> =>
          settlements === undefined || !settlements.pending()
            ? Effect.void
            : Effect.flatMap(settlements.write(deps, env, head), takeAnswers).pipe(Effect.catchAllCause(runFailure))
      )
      // Items before this index have had their rows read (or were not settlements).
      let readUpTo = 0
      for (const [index, item] of items.entries()) {
        const stored = receipts.get(item.identity.commandId)
        if (stored !== undefined) {
          results[index] = yield* answerFromReceipt(stored, item.identity)
          continue
        }
        if (!readsPage(item)) {
          // Not a settlement: it may read or write outbox rows, so the page is written first.
          yield* writeRun
          yield* page.flush
        } else if (index >= readUpTo) {
          // A run of settlements reads outbox rows: the deferred run's are written first.
          yield* writePending
          // The rows of this run of settlements (and chunks reading through the page), in one read.
          const run: Array<string> = []
          for (readUpTo = index; readUpTo < items.length && readsPage(items[readUpTo]!); readUpTo++) {
            const effectId = items[readUpTo]!.effectId
            if (effectId !== undefined && !receipts.has(items[readUpTo]!.identity.commandId)) run.push(effectId)
          }
          yield* page.prefetch(run)
        }
        const key = keyOf(item.identity.aggregateType, item.identity.aggregateId)
        const current = states.get(key) ?? deps.states.cached(key)
        if (settlements !== undefined && current !== undefined) {
          const after = settlements.decide(index, item, current, batchNow)
          if (after !== undefined) {
            states.set(key, after)
            continue
          }
        }
        yield* writeRun
        const defer = deferring && item.pure === true
        if (!defer) yield* writePending
        const write = (state: AggregateState) =>
          defer ? deferOrWrite(item, index, state) : decideAndWrite(deps, env, item, state, head)
        const body = Effect.suspend(() =>
          // The batch's own newer state first, then the committed cache, then a replay.
          current !== undefined
            ? write(current)
            : Effect.flatMap(deps.states.load(item.aggregate, item.identity.aggregateId), write)
        )
        // A command rolled back to its savepoint, or refused, appended nothing that will commit.
        const appendedBefore = env.appended.length
        const exit = isolate ? yield* deps.writer.savepoint(body, isStorageCause) : yield* Effect.exit(body)
        if (Exit.isFailure(exit) || !("answer" in exit.value)) env.appended.length = appendedBefore
        if (!isolate && Exit.isFailure(exit)) {
          if (isStorageCause(exit.cause)) return yield* Effect.failCause(exit.cause)
          // A deferred run written before this command failed (deferOrWrite): already the batch's answer.
          const failed = Cause.failureOption(exit.cause)
          if (Option.isSome(failed) && failed.value instanceof NeedsIsolation) return yield* Effect.fail(failed.value)
          return yield* Effect.fail(new NeedsIsolation(exit.cause as Cause.Cause<CommandDefect | AggregateUnavailable>))
        }
        if (Exit.isFailure(exit)) {
          page.drop()
          results[index] = Exit.failCause(exit.cause as Cause.Cause<CommandDefect | AggregateUnavailable>)
        } else if (exit.value instanceof CommandRejected || exit.value instanceof EffectActionRefused) {
          page.drop()
          results[index] = Exit.fail(exit.value)
        } else if ("answer" in exit.value) {
          page.keep()
          states.set(key, exit.value.state)
          head = exit.value.answer.sequence
          results[index] = Exit.succeed(exit.value.answer)
        } else {
          // Deferred: its answer comes with its run's write (writePending).
          pending.push(exit.value)
          states.set(key, exit.value.state)
        }
      }
      yield* writePending
      yield* writeRun
      yield* page.flush
      // Claims for idle reactors, in this transaction: they commit with the rows (CommitClaims.ts).
      if (claimRun !== undefined && deps.claims !== undefined && mayHaveMadeClaimable(items, results)) {
        claimRun.alone = yield* deps.claims.commitClaims
          .claim(env.clock.unsafeCurrentTimeMillis(), claimRun.handoffs)
          .pipe(
            Effect.mapError((error) => new ClaimRefused(Cause.fail(error))),
            Effect.catchAllDefect((defect) => Effect.fail(new ClaimRefused(Cause.die(defect))))
          )
      }
      yield* (yield* FaultPoints).hit("dispatch.before-commit")
      return {
        results,
        states,
        head,
        appended: env.appended,
        timers: env.touched.timers,
        cancels: env.touched.cancels
      } satisfies BatchOutcome
    })
  )

/** The effects whose settlement (or operator action) a committed batch accepted: no more chunks will follow. */
const settledEffects = (items: ReadonlyArray<QueuedCommand>, results: ReadonlyArray<CommandResult>) => {
  const settled: Array<string> = []
  for (const [index, item] of items.entries()) {
    const result = results[index]
    if (item.settles && item.effectId !== undefined && result !== undefined && Exit.isSuccess(result)) {
      settled.push(item.effectId)
    }
  }
  return settled
}

/**
 * How many times a batch that lost a race to another writer (StorageErrors.isLostRace) runs again
 * on fresh state before its unique violation is its answer. Each run reads what the winner
 * committed; losing again means another winner, so a few runs settle any real contention.
 */
const LOST_RACE_RUNS = 3

/**
 * Processes one batch to an answer per command, in order. Never fails: every failure is an answer.
 * Storage failures abandon the batch and re-run its commands alone, so each gets its own answer.
 */
/** The answer to a command whose batch failed by a bug of ours, not the store's. */
export const engineDefect = (cause: Cause.Cause<unknown>): StorageFailure =>
  new StorageFailure({
    reason: "unknown",
    code: "ENGINE_DEFECT",
    operation: "dispatch",
    message: `dispatch failed unexpectedly: ${Cause.pretty(cause)}`
  })

export const processBatch = (
  deps: ProcessorDeps,
  items: ReadonlyArray<QueuedCommand>,
  onAbandoned: () => void,
  isolate = false,
  run = 1,
  claim = true
): Effect.Effect<ReadonlyArray<CommandResult>, never, SqlClient> =>
  commitBatch(deps, items, isolate, claim).pipe(
    Effect.map((outcome) => {
      for (const [key, state] of outcome.states) deps.states.set(key, state)
      deps.head.value = outcome.head
      if (deps.touched !== undefined) {
        if (outcome.timers) deps.touched.timers = true
        for (const effectId of outcome.cancels) deps.touched.cancels.push(effectId)
      }
      if (deps.tails !== undefined) {
        deps.tails.committed(outcome.appended)
        deps.tails.forget(settledEffects(items, outcome.results))
      }
      return outcome.results
    }),
    Effect.catchAll((failure): Effect.Effect<ReadonlyArray<CommandResult>, never, SqlClient> => {
      const answerAlone = (
        answer: Exclude<typeof failure, NeedsIsolation | ClaimRefused>
      ): Effect.Effect<ReadonlyArray<CommandResult>, never, SqlClient> => {
        if (items.length === 1) return Effect.succeed([Exit.fail(answer)])
        onAbandoned()
        // Alone, and without claims at commit: these are runs after a failure, kept as they were.
        return Effect.forEach(items, (item) =>
          processBatch(deps, [item], onAbandoned, false, 1, false).pipe(Effect.map((r) => r[0]!))
        )
      }
      for (const item of items) deps.states.drop(keyOf(item.identity.aggregateType, item.identity.aggregateId))
      if (failure instanceof ClaimRefused) {
        return Effect.logWarning("a claim at commit failed; the batch runs again without it", {
          cause: Cause.pretty(failure.cause)
        }).pipe(Effect.zipRight(processBatch(deps, items, onAbandoned, isolate, run, false)))
      }
      if (failure instanceof NeedsIsolation) {
        // Alone, the rollback already isolated it: its failure is its answer and nothing was written.
        if (items.length === 1) return Effect.succeed([Exit.failCause(failure.cause)])
        return processBatch(deps, items, onAbandoned, true, 1, claim)
      }
      // Another writer committed the same receipt or aggregate version first (shared store): run
      // again on fresh state (the states were dropped above) instead of answering a storage failure.
      if (failure instanceof StorageFailure && isLostRace(failure) && run < LOST_RACE_RUNS) {
        return Effect.flatMap(StoreBackend, (backend) =>
          backend.shared ? processBatch(deps, items, onAbandoned, isolate, run + 1, claim) : answerAlone(failure)
        )
      }
      return answerAlone(failure)
    }),
    Effect.catchAllCause((cause) => {
      // A bug of ours, not the store's: every command of the batch fails visibly, none is answered accepted.
      const failure = engineDefect(cause)
      for (const item of items) deps.states.drop(keyOf(item.identity.aggregateType, item.identity.aggregateId))
      return Effect.succeed(items.map(() => Exit.fail(failure)))
    })
  )
