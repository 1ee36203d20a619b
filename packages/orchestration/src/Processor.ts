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
import { Cause, type Clock, Effect, Exit, Option, Schema } from "effect"
import { Decision, type AnyAggregate, type DecideContext, type Rejection } from "./Aggregate.js"
import { keyOf, type AggregateState, type AggregateStates } from "./AggregateStates.js"
import { canonicalJson } from "./CanonicalJson.js"
import { boundedId, commandIdProblem, EFFECT_ID_MAX } from "./CommandId.js"
import {
  type AggregateUnavailable,
  CommandDefect,
  CommandRejected,
  EffectActionRefused,
  StorageFailure,
  type DispatchError
} from "./Errors.js"
import { decideSettlement, type SettlementCommand } from "./EffectOutcomes.js"
import type * as EventLog from "./EventLog.js"
import { FaultPoints } from "./FaultPoints.js"
import * as Outbox from "./Outbox.js"
import * as Owners from "./Owners.js"
import * as Timers from "./Timers.js"
import { handles, type Projection } from "./Projection.js"
import type * as Receipts from "./Receipts.js"
import * as SettlementPage from "./SettlementPage.js"
import { answerFromReceipt, type DispatchAnswer } from "./StoredAnswers.js"
import { StorageFaults, type StorageFaultsShape } from "./storage/StorageFaults.js"
import { constraintViolation, type ConstraintViolation } from "./storage/StorageErrors.js"
import { StoreBackend } from "./storage/StoreBackend.js"
import type { CommitWriter } from "./storage/CommitWriter.js"
import { hasSqlError, writeTransaction } from "./storage/Transactions.js"

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
  /** A settlement's row, read with the other settlements of its batch (SettlementPage.ts). */
  readonly effectId?: string
}

/** A throw from domain code, as the typed failure of the command it was deciding. */
export const commandDefect = (identity: Receipts.CommandIdentity, stage: CommandDefect["stage"], error: unknown) =>
  new CommandDefect({
    commandId: identity.commandId,
    aggregateType: identity.aggregateType,
    aggregateId: identity.aggregateId,
    stage,
    message: `${stage} threw for ${identity.aggregateType} '${identity.aggregateId}': ${
      error instanceof Error ? error.message : String(error)
    }`
  })

/** A projection's write refused by its table's constraint: a defect of the command, the store is healthy. */
const constraintDefect = (identity: Receipts.CommandIdentity, projection: string, violation: ConstraintViolation) =>
  new CommandDefect({
    commandId: identity.commandId,
    aggregateType: identity.aggregateType,
    aggregateId: identity.aggregateId,
    stage: "projection",
    constraint: violation.constraint,
    message: `projection ${projection} violated constraint ${violation.constraint} (${violation.code}) for ${identity.aggregateType} '${identity.aggregateId}': ${violation.message}`
  })

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

interface Written {
  readonly answer: DispatchAnswer
  readonly state: AggregateState
}

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

/** What every command of a batch shares, looked up once per batch. */
interface BatchEnv {
  readonly page: SettlementPage.SettlementPage
  /** Injected storage faults (tests, chaos); undefined when none are configured, so nothing runs. */
  readonly faults: StorageFaultsShape | undefined
  readonly clock: Clock.Clock
}

// One encoder per aggregate, built once: Schema.encodeSync(schema) rebuilds it on every call.
const encoders = new WeakMap<AnyAggregate, (event: unknown) => unknown>()
const encoderOf = (aggregate: AnyAggregate) => {
  let encode = encoders.get(aggregate)
  if (encode === undefined) {
    encode = Schema.encodeSync(aggregate.events)
    encoders.set(aggregate, encode)
  }
  return encode
}

const decideAndWrite = (
  deps: ProcessorDeps,
  env: BatchEnv,
  item: QueuedCommand,
  current: AggregateState,
  head: number
): Effect.Effect<Written | CommandRejected | EffectActionRefused, SqlError | CommandDefect, SqlClient> =>
  Effect.gen(function* () {
    const faults = env.faults
    const { aggregate, identity } = item
    const commandId = identity.commandId
    const now = env.clock.unsafeCurrentTimeMillis()
    const ctx: DecideContext = {
      commandId,
      aggregateId: identity.aggregateId,
      now,
      deriveId: (key: string) => boundedId("", `${commandId}:${key}`)
    }
    const decision = yield* item.decide(current.state, ctx, env.page)
    if (decision instanceof EffectActionRefused) return decision

    if (decision._tag === "Rejection") {
      if (faults) yield* faults.before("receipts", commandId)
      yield* deps.writer.insertReceipt({
        ...identity,
        status: "rejected",
        firstSequence: null,
        lastSequence: head,
        effectIds: [],
        rejection: { reason: decision.reason, message: decision.message },
        acceptedAt: now
      })
      return new CommandRejected({
        commandId,
        aggregateType: identity.aggregateType,
        aggregateId: identity.aggregateId,
        reason: decision.reason,
        message: decision.message,
        duplicate: false
      })
    }

    let state = current.state
    const encoded: Array<{ type: string; json: string }> = []
    try {
      for (const event of decision.events) {
        state = aggregate.evolve(state, event)
        encoded.push({ type: event.type, json: JSON.stringify(encoderOf(aggregate)(event)) })
      }
    } catch (error) {
      return yield* Effect.fail(commandDefect(identity, "evolve", error))
    }

    const effectIds = decision.effects.map(
      (intent, index) => intent.id ?? boundedId("", `${commandId}:${intent.key ?? `effect-${index}`}`)
    )
    const badId = effectIds.find((id) => id.length > EFFECT_ID_MAX || commandIdProblem(id, "internal") !== undefined)
    if (badId !== undefined) {
      return yield* Effect.fail(
        commandDefect(
          identity,
          "decide",
          new Error(`effect id '${badId.slice(0, 80)}…' does not fit the id rules; build it with CommandId.boundedId`)
        )
      )
    }
    const effectRows = decision.effects.map(
      (intent, index): Outbox.NewOutboxRow => ({
        effectId: effectIds[index]!,
        commandId,
        aggregateType: aggregate.name,
        aggregateId: identity.aggregateId,
        kind: intent.kind,
        payloadJson: canonicalJson(intent.payload),
        lane: intent.lane ?? `${aggregate.name}:${identity.aggregateId}`,
        availableAt: intent.availableAt ?? now,
        now
      })
    )
    const newEvents = encoded.map(
      (e, index): EventLog.NewEvent => ({
        eventId: `${commandId}/event-${index}`,
        aggregateType: aggregate.name,
        aggregateId: identity.aggregateId,
        version: current.version + index + 1,
        type: e.type,
        schemaVersion: aggregate.eventSchemaVersion,
        payloadJson: e.json,
        commandId,
        occurredAt: now
      })
    )
    // Where the store writes a command's rows in one statement (PostgreSQL), events, outbox rows and
    // receipt go first, together; projections, cancels and timers follow in the same savepoint.
    const writeCommand = deps.writer.writeCommand
    if (faults) yield* faults.before("events", commandId)
    if (faults && writeCommand !== undefined) {
      if (effectRows.length > 0) yield* faults.before("outbox", commandId)
      yield* faults.before("receipts", commandId)
    }
    const records =
      writeCommand === undefined
        ? yield* deps.writer.appendEvents(newEvents)
        : yield* writeCommand(
            newEvents,
            effectRows,
            { ...identity, status: "accepted", effectIds, rejection: null, acceptedAt: now },
            head
          )

    for (const [index, record] of records.entries()) {
      for (const projection of deps.projections) {
        if (!handles(projection, record)) continue
        if (faults) yield* faults.before("projections", commandId)
        yield* Effect.suspend(() => projection.apply(decision.events[index], record)).pipe(
          Effect.catchAll((error) => {
            const violation = constraintViolation(error)
            return Effect.fail(violation === undefined ? error : constraintDefect(identity, projection.name, violation))
          }),
          Effect.catchAllDefect((error) => Effect.fail(commandDefect(identity, "projection", error)))
        )
      }
    }

    if (writeCommand === undefined && effectRows.length > 0) {
      if (faults) yield* faults.before("outbox", commandId)
      yield* deps.writer.insertOutbox(effectRows)
    }

    for (const cancel of decision.cancel) {
      yield* Outbox.cancelUnsettled(cancel.effectId, aggregate.name, identity.aggregateId, cancel.reason, now)
    }
    // Timers go in their own table (Timers.ts), after the outbox, in the same savepoint.
    if (decision.cancelTimers !== undefined) {
      yield* Timers.cancel(aggregate.name, identity.aggregateId, decision.cancelTimers, now)
    }
    if (decision.timers !== undefined) {
      const badTimer = decision.timers.find((t) => commandIdProblem(t.timerId, "client") !== undefined)
      if (badTimer !== undefined) {
        return yield* Effect.fail(
          commandDefect(
            identity,
            "decide",
            new Error(`timer id '${badTimer.timerId.slice(0, 80)}' does not fit the id rules`)
          )
        )
      }
      yield* Timers.schedule(aggregate.name, identity.aggregateId, decision.timers, now)
    }

    const lastSequence = records.at(-1)?.sequence ?? head
    if (writeCommand === undefined) {
      if (faults) yield* faults.before("receipts", commandId)
      yield* deps.writer.insertReceipt({
        ...identity,
        status: "accepted",
        firstSequence: records[0]?.sequence ?? null,
        lastSequence,
        effectIds,
        rejection: null,
        acceptedAt: now
      })
    }
    return {
      answer: {
        commandId,
        status: "accepted",
        aggregateType: aggregate.name,
        aggregateId: identity.aggregateId,
        sequence: lastSequence,
        events: records,
        effectIds,
        duplicate: false
      },
      state: { state, version: current.version + records.length }
    } satisfies Written
  })

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
        if (!item.settles) {
          // Not a settlement: it may read or write outbox rows, so the page is written first.
          yield* page.flush
        } else if (index >= readUpTo) {
          // The rows of this run of settlements, in one read.
          const run: Array<string> = []
          for (readUpTo = index; readUpTo < items.length && items[readUpTo]!.settles; readUpTo++) {
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
