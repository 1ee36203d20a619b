/**
 * One command inside the batch's transaction: its decision, then its events, the projections that
 * read them, its outbox rows, cancels, timers and receipt, or a rejection's receipt alone. A throw
 * from domain code (decide, evolve, a projection) is the command's typed defect, never the store's.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { type Clock, Effect, Exit, Schema } from "effect"
import type { AnyAggregate, DecideContext, Decision, EventRecord, Rejection } from "./Aggregate.js"
import type { AggregateState } from "./AggregateStates.js"
import { canonicalJson } from "./CanonicalJson.js"
import { boundedId, commandIdProblem, EFFECT_ID_MAX } from "./CommandId.js"
import { CommandDefect, CommandRejected, EffectActionRefused } from "./Errors.js"
import type * as EventLog from "./EventLog.js"
import * as Outbox from "./Outbox.js"
import type { ProcessorDeps, QueuedCommand } from "./Processor.js"
import { handles, type ProjectedEvent } from "./Projection.js"
import type * as Receipts from "./Receipts.js"
import type * as SettlementPage from "./SettlementPage.js"
import type { StreamChunk } from "./StreamChunks.js"
import type { DispatchAnswer } from "./StoredAnswers.js"
import type { CommandRows } from "./storage/CommitWriter.js"
import type { StorageFaultsShape } from "./storage/StorageFaults.js"
import { constraintViolation, type ConstraintViolation } from "./storage/StorageErrors.js"
import * as Timers from "./Timers.js"

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

export interface Written {
  readonly answer: DispatchAnswer
  readonly state: AggregateState
}

/** What a batch's decisions touched besides their own rows, for the engine's hints after its commit. */
export interface Touched {
  /** Whether a decision scheduled or cancelled timers (the timer loop is rung). */
  timers: boolean
  /** The effects whose rows decisions cancelled (their performers' cancel watches must look: OutboxTouches). */
  readonly cancels: Array<string>
}

/** What every command of a batch shares, looked up once per batch. */
export interface BatchEnv {
  readonly page: SettlementPage.SettlementPage
  /** The stream chunks the batch's commands appended (Processor.Decide). */
  readonly appended: Array<StreamChunk>
  /** Set when a command of the batch wrote timers (only ever errs towards set: a rolled-back write stays). */
  readonly touched: Touched
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

/** What a decider is told about the command it decides. */
export const decideContext = (identity: Receipts.CommandIdentity, now: number): DecideContext => ({
  commandId: identity.commandId,
  aggregateId: identity.aggregateId,
  now,
  deriveId: (key: string) => boundedId("", `${identity.commandId}:${key}`)
})

/** A rejection's receipt: nothing else is written, and the answer says why. */
const writeRejection = (
  deps: ProcessorDeps,
  env: BatchEnv,
  identity: Receipts.CommandIdentity,
  rejection: Rejection,
  head: number,
  now: number
): Effect.Effect<CommandRejected, SqlError, SqlClient> =>
  Effect.gen(function* () {
    if (env.faults) yield* env.faults.before("receipts", identity.commandId)
    yield* deps.writer.insertReceipts([rejectionReceipt(identity, rejection, head, now)])
    return rejectedAnswer(identity, rejection)
  })

/** The receipt of a rejected command: its reason, and the log head it was decided at. */
export const rejectionReceipt = (
  identity: Receipts.CommandIdentity,
  rejection: Rejection,
  head: number,
  now: number
): Receipts.Receipt => ({
  ...identity,
  status: "rejected",
  firstSequence: null,
  lastSequence: head,
  effectIds: [],
  rejection: { reason: rejection.reason, message: rejection.message },
  acceptedAt: now
})

export const rejectedAnswer = (identity: Receipts.CommandIdentity, rejection: Rejection) =>
  new CommandRejected({
    commandId: identity.commandId,
    aggregateType: identity.aggregateType,
    aggregateId: identity.aggregateId,
    reason: rejection.reason,
    message: rejection.message,
    duplicate: false
  })

/** The decision's events folded into the state and encoded; a throw from either is the command's defect. */
export const evolveAndEncode = (
  item: QueuedCommand,
  current: AggregateState,
  events: ReadonlyArray<any>
): { readonly state: unknown; readonly encoded: ReadonlyArray<{ type: string; json: string }> } | CommandDefect => {
  const { aggregate } = item
  let state = current.state
  const encoded: Array<{ type: string; json: string }> = []
  try {
    for (const event of events) {
      state = aggregate.evolve(state, event)
      encoded.push({ type: event.type, json: JSON.stringify(encoderOf(aggregate)(event)) })
    }
  } catch (error) {
    return commandDefect(item.identity, "evolve", error)
  }
  return { state, encoded }
}

/** The outbox rows of the decision's effects, with deterministic ids; an id that breaks the rules is a defect. */
const plannedEffects = (
  item: QueuedCommand,
  decision: Decision<any>,
  now: number
):
  | { readonly effectIds: ReadonlyArray<string>; readonly effectRows: ReadonlyArray<Outbox.NewOutboxRow> }
  | CommandDefect => {
  const { aggregate, identity } = item
  const commandId = identity.commandId
  const effectIds = decision.effects.map(
    (intent, index) => intent.id ?? boundedId("", `${commandId}:${intent.key ?? `effect-${index}`}`)
  )
  const badId = effectIds.find((id) => id.length > EFFECT_ID_MAX || commandIdProblem(id, "internal") !== undefined)
  if (badId !== undefined) {
    return commandDefect(
      identity,
      "decide",
      new Error(`effect id '${badId.slice(0, 80)}…' does not fit the id rules; build it with CommandId.boundedId`)
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
  return { effectIds, effectRows }
}

export const newEventsOf = (
  item: QueuedCommand,
  current: AggregateState,
  encoded: ReadonlyArray<{ type: string; json: string }>,
  now: number
) =>
  encoded.map(
    (e, index): EventLog.NewEvent => ({
      eventId: `${item.identity.commandId}/event-${index}`,
      aggregateType: item.aggregate.name,
      aggregateId: item.identity.aggregateId,
      version: current.version + index + 1,
      type: e.type,
      schemaVersion: item.aggregate.eventSchemaVersion,
      payloadJson: e.json,
      commandId: item.identity.commandId,
      occurredAt: now
    })
  )

/**
 * Each committed event through the projections that read it. A projection's constraint violation or
 * throw is the command's defect; any other SQL error is the store's.
 */
export const applyProjections = (
  deps: ProcessorDeps,
  env: BatchEnv,
  identity: Receipts.CommandIdentity,
  events: ReadonlyArray<unknown>,
  records: ReadonlyArray<EventRecord>
): Effect.Effect<void, SqlError | CommandDefect, SqlClient> =>
  Effect.gen(function* () {
    for (const [index, record] of records.entries()) {
      for (const projection of deps.projections) {
        if (!handles(projection, record)) continue
        if (env.faults) yield* env.faults.before("projections", identity.commandId)
        yield* Effect.suspend(() => projection.apply(events[index], record)).pipe(
          Effect.catchAll((error) => {
            const violation = constraintViolation(error)
            return Effect.fail(violation === undefined ? error : constraintDefect(identity, projection.name, violation))
          }),
          Effect.catchAllDefect((error) => Effect.fail(commandDefect(identity, "projection", error)))
        )
      }
    }
  })

/**
 * The decision's cancels and timers, in the command's savepoint after its outbox rows. A cancel of a
 * row the batch's page has read goes into the page, which would otherwise write its stale view of
 * the row over it (SettlementPage.cancel); any other is written at once.
 */
const writeCancelsAndTimers = (
  item: QueuedCommand,
  env: BatchEnv,
  decision: Decision<any>,
  now: number
): Effect.Effect<void, SqlError | CommandDefect, SqlClient> =>
  Effect.gen(function* () {
    const { aggregate, identity } = item
    for (const cancel of decision.cancel) {
      env.touched.cancels.push(cancel.effectId)
      if (env.page.cancel(cancel.effectId, aggregate.name, identity.aggregateId, cancel.reason, now)) continue
      yield* Outbox.cancelUnsettled(cancel.effectId, aggregate.name, identity.aggregateId, cancel.reason, now)
    }
    // Timers go in their own table (Timers.ts), after the outbox, in the same savepoint.
    if (decision.cancelTimers !== undefined || decision.timers !== undefined) env.touched.timers = true
    if (decision.cancelTimers !== undefined) {
      yield* Timers.cancel(aggregate.name, identity.aggregateId, decision.cancelTimers, now)
    }
    if (decision.timers !== undefined) {
      const badTimer = decision.timers.find((t) => commandIdProblem(t.timerId, "client") !== undefined)
      if (badTimer !== undefined) {
        return yield* commandDefect(
          identity,
          "decide",
          new Error(`timer id '${badTimer.timerId.slice(0, 80)}' does not fit the id rules`)
        )
      }
      yield* Timers.schedule(aggregate.name, identity.aggregateId, decision.timers, now)
    }
  })

/**
 * One command inside the batch's transaction: its decision, then its events, projections, outbox
 * rows, cancels, timers and receipt (or the rejection's receipt alone).
 */
export const decideAndWrite = (
  deps: ProcessorDeps,
  env: BatchEnv,
  item: QueuedCommand,
  current: AggregateState,
  head: number
): Effect.Effect<Written | CommandRejected | EffectActionRefused, SqlError | CommandDefect, SqlClient> =>
  Effect.flatMap(decide(env, item, current), ({ decision, now }) =>
    writeDecided(deps, env, item, current, head, decision, now)
  )

/** What a command's decider answered, and the time it decided at. */
export interface Decided {
  readonly decision: Decision<any> | Rejection | EffectActionRefused | CommandRejected
  readonly now: number
}

export const decide = (
  env: BatchEnv,
  item: QueuedCommand,
  current: AggregateState
): Effect.Effect<Decided, SqlError | CommandDefect, SqlClient> =>
  Effect.suspend(() => {
    const now = env.clock.unsafeCurrentTimeMillis()
    return Effect.map(
      item.decide(current.state, decideContext(item.identity, now), env.page, env.appended),
      (decision) => ({ decision, now })
    )
  })

/** A decided command's writes, at once: its events, projections, outbox rows, cancels, timers and receipt. */
export const writeDecided = (
  deps: ProcessorDeps,
  env: BatchEnv,
  item: QueuedCommand,
  current: AggregateState,
  head: number,
  decision: Decided["decision"],
  now: number
): Effect.Effect<Written | CommandRejected | EffectActionRefused, SqlError | CommandDefect, SqlClient> =>
  Effect.gen(function* () {
    const faults = env.faults
    const { aggregate, identity } = item
    const commandId = identity.commandId
    // Refused for now, not for good (Processor.Decide): no receipt.
    if (decision instanceof EffectActionRefused || decision instanceof CommandRejected) return decision
    if (decision._tag === "Rejection") return yield* writeRejection(deps, env, identity, decision, head, now)

    const evolved = evolveAndEncode(item, current, decision.events)
    if (evolved instanceof CommandDefect) return yield* evolved
    const planned = plannedEffects(item, decision, now)
    if (planned instanceof CommandDefect) return yield* planned
    const { effectIds, effectRows } = planned
    const newEvents = newEventsOf(item, current, evolved.encoded, now)
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

    yield* applyProjections(deps, env, identity, decision.events, records)

    if (writeCommand === undefined && effectRows.length > 0) {
      if (faults) yield* faults.before("outbox", commandId)
      yield* deps.writer.insertOutbox(effectRows)
    }

    yield* writeCancelsAndTimers(item, env, decision, now)

    const lastSequence = records.at(-1)?.sequence ?? head
    if (writeCommand === undefined) {
      if (faults) yield* faults.before("receipts", commandId)
      yield* deps.writer.insertReceipts([
        {
          ...identity,
          status: "accepted",
          firstSequence: records[0]?.sequence ?? null,
          lastSequence,
          effectIds,
          rejection: null,
          acceptedAt: now
        }
      ])
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
      state: { state: evolved.state, version: current.version + records.length }
    } satisfies Written
  })

/**
 * A command of a deferred run (Processor.ts): decided, encoded, its rows waiting for the run's one
 * write (CommitWriter.writeCommands). An accepted decision or a rejection's receipt alone.
 */
export interface Deferred extends DeferredRows {
  readonly _tag: "Deferred"
  /** The aggregate after the command. */
  readonly state: AggregateState
}

/** A command's rows waiting for its run's write (a deferred run's, or a run of settlements'). */
export interface DeferredRows {
  /** Its place in the batch. */
  readonly index: number
  readonly identity: Receipts.CommandIdentity
  readonly rows: CommandRows
  /** The decided events, in order, for the projections (none for a rejection). */
  readonly events: ReadonlyArray<unknown>
  readonly rejection: Rejection | undefined
}

/**
 * The rows a decided command would write, to be written with its run; `undefined` when it must be
 * written at once because it writes other tables too (cancels, timers), and the command's defect
 * when evolving or planning its effects throws.
 */
export const deferrable = (
  index: number,
  item: QueuedCommand,
  current: AggregateState,
  decision: Decision<any> | Rejection,
  now: number
): Deferred | CommandDefect | undefined => {
  const { identity } = item
  if (decision._tag === "Rejection") {
    const receipt = rejectionReceipt(identity, decision, 0, now)
    return {
      _tag: "Deferred",
      index,
      identity,
      rows: { events: [], effects: [], receipt },
      events: [],
      rejection: decision,
      state: current
    }
  }
  if (decision.cancel.length > 0 || decision.timers !== undefined || decision.cancelTimers !== undefined) {
    return undefined
  }
  const evolved = evolveAndEncode(item, current, decision.events)
  if (evolved instanceof CommandDefect) return evolved
  const planned = plannedEffects(item, decision, now)
  if (planned instanceof CommandDefect) return planned
  const newEvents = newEventsOf(item, current, evolved.encoded, now)
  return {
    _tag: "Deferred",
    index,
    identity,
    rows: {
      events: newEvents,
      effects: planned.effectRows,
      receipt: { ...identity, status: "accepted", effectIds: planned.effectIds, rejection: null, acceptedAt: now }
    },
    events: decision.events,
    rejection: undefined,
    state: { state: evolved.state, version: current.version + newEvents.length }
  }
}

/** What a deferred run's write answered: each command's result by its batch index, and the new head. */
export interface WrittenDeferred {
  readonly answers: ReadonlyArray<{
    readonly index: number
    readonly result: Exit.Exit<DispatchAnswer, CommandRejected>
  }>
  readonly head: number
}

/**
 * A deferred run in one write, then its events through the projections: each projection takes the
 * run's events it reads at once (`applyMany`) or one by one. A projection's constraint violation or
 * throw is a defect of some command of the run (which one, the batch's re-run with savepoints tells);
 * any other SQL error is the store's.
 */
export const writeDeferred = (
  deps: ProcessorDeps,
  env: BatchEnv,
  run: ReadonlyArray<DeferredRows>,
  head: number
): Effect.Effect<WrittenDeferred, SqlError | CommandDefect, SqlClient> =>
  Effect.gen(function* () {
    const faults = env.faults
    // Injected faults at each command's points, in the order a command written alone meets them; one
    // fails the whole transaction, as any refused write of an optimistic batch does.
    if (faults) {
      for (const d of run) {
        if (d.rejection === undefined) yield* faults.before("events", d.identity.commandId)
        if (d.rows.effects.length > 0) yield* faults.before("outbox", d.identity.commandId)
        yield* faults.before("receipts", d.identity.commandId)
      }
    }
    const records = yield* deps.writer.writeCommands(
      run.map((d) => d.rows),
      head
    )
    let last = head
    const answers: Array<WrittenDeferred["answers"][number]> = []
    for (const [i, d] of run.entries()) {
      const { identity } = d
      if (d.rejection !== undefined) {
        answers.push({ index: d.index, result: Exit.fail(rejectedAnswer(identity, d.rejection)) })
        continue
      }
      const own = records[i]!
      last = own.at(-1)?.sequence ?? last
      answers.push({
        index: d.index,
        result: Exit.succeed({
          commandId: identity.commandId,
          status: "accepted",
          aggregateType: identity.aggregateType,
          aggregateId: identity.aggregateId,
          sequence: last,
          events: own,
          effectIds: d.rows.receipt.effectIds,
          duplicate: false
        })
      })
    }
    const blame = run[0]!.identity
    for (const projection of deps.projections) {
      const projected: Array<ProjectedEvent> = []
      for (const [i, d] of run.entries()) {
        for (const [e, record] of records[i]!.entries()) {
          if (!handles(projection, record)) continue
          if (faults) yield* faults.before("projections", d.identity.commandId)
          projected.push({ event: d.events[e], record })
        }
      }
      if (projected.length === 0) continue
      const apply =
        projection.applyMany !== undefined
          ? Effect.suspend(() => projection.applyMany!(projected))
          : Effect.forEach(projected, (p) => Effect.suspend(() => projection.apply(p.event, p.record)), {
              discard: true
            })
      yield* apply.pipe(
        Effect.catchAll((error) => {
          const violation = constraintViolation(error)
          return Effect.fail(violation === undefined ? error : constraintDefect(blame, projection.name, violation))
        }),
        Effect.catchAllDefect((error) => Effect.fail(commandDefect(blame, "projection", error)))
      )
    }
    return { answers, head: last }
  })
