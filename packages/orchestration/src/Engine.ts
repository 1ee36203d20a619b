/**
 * The engine service: the one front door (`dispatchWithReceipt`), the reads of the log, and the
 * lifecycle (parked until activated, drained on shutdown). It wires the parts, each in its module:
 * CommandRouter (validate and route, pure), CommandQueue (bounded, coalescing duplicates),
 * Lifecycle (migrate, phases, drain), the single processor fiber below (see Processor.ts for what
 * one commit holds), CommitHints (the hints rung after commits) and ReadSide (the reads).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Cause, Context, Effect, Exit, Layer, Option, type Scope, Stream } from "effect"
import type { AnyAggregate, EventRecord } from "./Aggregate.js"
import { keyOf, makeAggregateStates } from "./AggregateStates.js"
import type { Origin } from "./CommandId.js"
import * as CommandQueue from "./CommandQueue.js"
import * as CommandRouter from "./CommandRouter.js"
import * as CommitClaims from "./CommitClaims.js"
import * as CommitHints from "./CommitHints.js"
import {
  EngineUnavailable,
  InvalidCommand,
  type DispatchError,
  type StorageFailure,
  type UndecodableEvent
} from "./Errors.js"
import * as EventLog from "./EventLog.js"
import * as FlushWindows from "./FlushWindows.js"
import * as StreamTails from "./StreamTails.js"
import { FaultPoints } from "./FaultPoints.js"
import { FreeSpace, type FreeSpaceShape } from "./FreeSpace.js"
import * as Lifecycle from "./Lifecycle.js"
import type * as OutboxTouches from "./OutboxTouches.js"
import {
  engineDefect,
  processBatch,
  type CommandResult,
  type DispatchAnswer,
  type ProcessorClaims,
  type QueuedCommand
} from "./Processor.js"
import * as Projection from "./Projection.js"
import * as ReadSide from "./ReadSide.js"
import type * as Receipts from "./Receipts.js"
import type { Touched } from "./CommandWrite.js"
import * as CommitWriter from "./storage/CommitWriter.js"
import { toStorageFailure } from "./storage/StorageErrors.js"
import { notifyOthersOfRowWrite, StoreBackend, type StoreBackendShape } from "./storage/StoreBackend.js"

export type { DispatchAnswer } from "./Processor.js"
export type { ReadEventsOptions } from "./ReadSide.js"

export interface EngineConfig {
  readonly aggregates: ReadonlyArray<AnyAggregate>
  readonly projections?: ReadonlyArray<Projection.Projection>
  /** Most commands one transaction takes (group commit). Default 64; 1 turns group commit off. */
  readonly maxBatch?: number
  /** Queued commands beyond this are refused with EngineUnavailable (overloaded). Default 10,000. */
  readonly queueCapacity?: number
  /** Aggregates whose state is kept in memory. Default 10,000. */
  readonly cacheCapacity?: number
  /** `wait` (default): a dispatch before activation is queued and runs once activated; `fail`: EngineUnavailable. */
  readonly beforeActivation?: Lifecycle.BeforeActivation
  /** `on-start` (default) opens the gate when the layer is built; `manual` waits for `activate`. */
  readonly activation?: "on-start" | "manual"
}

export interface DispatchOptions {
  /** `client` (default) enforces the client id rules and reserved types; `internal` is the engine's. */
  readonly origin?: Origin
}

export interface EngineStats {
  readonly transactions: number
  readonly abandonedBatches: number
  readonly committedCommands: number
  readonly queueDepth: number
  readonly cachedAggregates: number
  readonly quarantinedAggregates: number
  readonly head: number
}

export interface EngineShape {
  /** The only way in. Answers once the command's receipt committed (or was found). */
  readonly dispatchWithReceipt: (
    command: unknown,
    options?: DispatchOptions
  ) => Effect.Effect<DispatchAnswer, DispatchError>
  /**
   * Runs one internal command right away, before activation (boot reconcile): the processor is still
   * parked, so nothing else is admitted before it. Dies if the engine is already active.
   */
  readonly dispatchDuringBoot: (command: unknown) => Effect.Effect<DispatchAnswer, DispatchError>
  /** The same for many commands, group-committed; one answer per command, in order. */
  readonly dispatchManyDuringBoot: (
    commands: ReadonlyArray<unknown>
  ) => Effect.Effect<ReadonlyArray<Exit.Exit<DispatchAnswer, DispatchError>>>
  /** Resolves when the engine is activated (reactors park on it). */
  readonly awaitActivation: Effect.Effect<void>
  readonly isActive: Effect.Effect<boolean>
  /** First step of shutdown: clients are refused, internal settlements still run. */
  readonly stopAdmitting: Effect.Effect<void>
  /**
   * A hint after every commit that added, cancelled or settled outbox rows; never data. Yielding it
   * subscribes in the current scope; the stream then holds every hint rung from that point on (the
   * latest one, when its reader is slow), so subscribe first, then read the table, then follow:
   * `const changes = yield* engine.outboxChanges; yield* Effect.forkScoped(Stream.runForEach(changes, f))`.
   */
  readonly outboxChanges: Effect.Effect<Stream.Stream<void>, never, Scope.Scope>
  /**
   * Which rows the commits behind those hints may have moved out of `running` (OutboxTouches.ts): a
   * performer's cancel watch reads its rows only when one of them may be among them.
   */
  readonly outboxTouches: OutboxTouches.OutboxTouches
  /**
   * A hint after every commit that scheduled or cancelled timers, and after any other process's
   * commit; never data. Subscribes when yielded, as `outboxChanges` does.
   */
  readonly timerChanges: Effect.Effect<Stream.Stream<void>, never, Scope.Scope>
  /**
   * A hint after every commit that accepted a command of this aggregate (its events, its effects'
   * rows, its effects' stream chunks changed), and after any other process's commit; never data.
   * Subscribes when yielded, as `outboxChanges` does. A stream chunk rings only this hint.
   */
  readonly aggregateChanges: (
    aggregateType: string,
    aggregateId: string
  ) => Effect.Effect<Stream.Stream<void>, never, Scope.Scope>
  /**
   * Rings `aggregateChanges` of this aggregate, here and in other processes on a shared store, for a
   * change of its effect rows made outside the front door: a performer's word that its cancelled
   * handler stopped (a plain row update, no command), which a thread's reader waits for before it
   * closes the stopped step. Fails only when the other processes could not be told.
   */
  readonly ringAggregate: (aggregateType: string, aggregateId: string) => Effect.Effect<void, StorageFailure>
  /**
   * Told after a write of outbox rows outside the front door that may have made a row claimable (a
   * performer handing a row back to pending, an operator failing a parked row that held its lane): it is
   * recorded in the touches (OutboxTouches), rings this process's reactors and notifies the other
   * processes on a shared store, as a commit of the front door does. Without it a reactor found such a
   * row only at its poll. A notification that cannot be sent is logged: the row is written, and the
   * other processes' reactors find it at their poll.
   */
  readonly outboxWritten: (effectIds: ReadonlyArray<string>) => Effect.Effect<void>
  /**
   * Registers a reactor to take rows claimed for it inside the commits that make them claimable
   * (CommitClaims.ts), for the life of the caller's scope.
   */
  readonly claimAtCommit: (claimer: CommitClaims.Claimer) => Effect.Effect<void, never, Scope.Scope>
  /**
   * The same hints as `aggregateChanges`, as a follower that also tells whether the commits since
   * it last looked may have written the aggregate's events, or only its effects' stream chunks and
   * rows (CommitHints.AggregateFollower): a reader of a thread's live text skips the event read.
   */
  readonly followAggregate: (
    aggregateType: string,
    aggregateId: string
  ) => Effect.Effect<CommitHints.AggregateFollower, never, Scope.Scope>
  readonly aggregate: (name: string) => AnyAggregate | undefined
  /**
   * Forgets that this aggregate's log could not be replayed (an operator repaired it and releases a
   * quarantined effect): its next command replays the log again instead of being refused at once.
   */
  readonly releaseAggregate: (aggregateType: string, aggregateId: string) => Effect.Effect<void>
  readonly receipt: (commandId: string) => Effect.Effect<Option.Option<Receipts.Receipt>, StorageFailure>
  readonly readEvents: (
    options?: ReadSide.ReadEventsOptions
  ) => Effect.Effect<ReadonlyArray<EventRecord>, StorageFailure>
  /** Catches up from the table, then follows new commits: every event once, in order. */
  readonly followEvents: (options?: ReadSide.FollowOptions) => Stream.Stream<EventRecord, StorageFailure>
  /** Decodes a stored event with its aggregate's schema. */
  readonly decode: (record: EventRecord) => Effect.Effect<unknown, UndecodableEvent>
  /** One page of an effect's stream chunks (StreamChunks), all attempts, by attempt then offset. */
  readonly readStreamChunks: ReadSide.ReadSide["readStreamChunks"]
  /** Catches up on an effect's chunks, then follows new commits; ends once the effect settled. */
  readonly followStreamChunks: ReadSide.ReadSide["followStreamChunks"]
  /** Empties every projection and replays the whole log into them, in one transaction. */
  readonly rebuildProjections: Effect.Effect<number, StorageFailure | UndecodableEvent>
  readonly activate: Effect.Effect<void>
  /**
   * Refuses client commands, waits until no command is queued or in a batch (internal settlements
   * are still admitted meanwhile), then refuses everything. Idempotent; also run at scope close.
   */
  readonly shutdown: Effect.Effect<void>
  readonly stats: Effect.Effect<EngineStats>
  /**
   * A hint after every commit that wrote events (the last sequence); never data: read the log.
   * Subscribes when yielded, in the current scope, as `outboxChanges` does.
   */
  readonly commits: Effect.Effect<Stream.Stream<number>, never, Scope.Scope>
}

export class Engine extends Context.Tag("orchestration/Engine")<Engine, EngineShape>() {}

/**
 * Boot-time commands per transaction. Nothing else runs at boot, so a long transaction delays nobody,
 * and each COMMIT saved is an fsync saved (reconcile settles its rows 2,000 at a time).
 */
const BOOT_BATCH = 2_048

const belowFloor = (space: { readonly freeBytes: number; readonly floorBytes: number }) =>
  new EngineUnavailable({
    reason: "storage-below-floor",
    message: `the data volume has ${space.freeBytes} bytes free, below the floor of ${space.floorBytes}; new work is refused until space returns`
  })

/** Routes boot-time commands: the ones to run, and an answer already for each one refused. */
const routeForBoot = (router: CommandRouter.CommandRouter, inputs: ReadonlyArray<unknown>) => {
  const results: Array<CommandResult> = []
  const prepared: Array<{ readonly index: number; readonly command: QueuedCommand }> = []
  for (const [index, input] of inputs.entries()) {
    // A throw while preparing one command (a defect) is that command's answer, not the batch's.
    let command: QueuedCommand | InvalidCommand
    try {
      command = router.route(input, "internal")
    } catch (error) {
      results[index] = Exit.die(error)
      continue
    }
    if (command instanceof InvalidCommand) results[index] = Exit.fail(command)
    else prepared.push({ index, command })
  }
  return { results, prepared }
}

interface BatchRunnerDeps {
  readonly sql: SqlClient
  /** The processor and boot-time dispatch both write; one at a time. */
  readonly writer: Effect.Semaphore
  readonly head: { value: number }
  readonly states: ReturnType<typeof makeAggregateStates>
  readonly projections: ReadonlyArray<Projection.Projection>
  readonly commitWriter: CommitWriter.CommitWriter
  readonly hints: CommitHints.CommitHints
  readonly counters: { transactions: number; abandonedBatches: number; committedCommands: number }
  readonly tails: StreamTails.StreamTailsShape
  /** Claims at commit for idle reactors. */
  readonly commitClaims: CommitClaims.CommitClaims
  readonly freeSpace: FreeSpaceShape
  /** Told of each commit (StoreBackend.ownCommit). */
  readonly backend: StoreBackendShape
}

/**
 * Commits a batch and rings whoever waits on what it changed. `answer` runs between the engine's
 * own hints and the aggregates' readers: the clients answered (a stream's flusher, which then
 * waits for its next flush window) run before every reader of the batch re-reads the store.
 */
const batchRunner =
  (deps: BatchRunnerDeps) =>
  (
    batch: ReadonlyArray<QueuedCommand>,
    answer: (results: ReadonlyArray<CommandResult>) => void = () => {},
    /** Told the batch's results as soon as they are known (committed or not), before the work after. */
    decided: (results: ReadonlyArray<CommandResult>) => void = () => {}
  ): Effect.Effect<ReadonlyArray<CommandResult>> => {
    const { sql, writer, head, states, projections, commitWriter, hints, counters, tails, commitClaims, freeSpace } =
      deps
    return writer
      .withPermits(1)(
        Effect.gen(function* () {
          const before = head.value
          const committedBefore = counters.committedCommands
          counters.transactions++
          const touched: Touched = { timers: false, cancels: [] }
          // Before the transaction: a cancel of a row it claims commits later, and names the row then.
          const since = hints.outboxTouches.mark()
          // Below the storage guard's floor reactors start nothing new, nor does a commit for them. The
          // probe is read here, before the transaction, not inside it (it may be a syscall).
          const claims: ProcessorClaims | undefined =
            commitClaims.active() && !(yield* freeSpace.check).belowFloor ? { commitClaims, handoffs: [] } : undefined
          const results = yield* processBatch(
            { states, projections, head, writer: commitWriter, tails, touched, ...(claims && { claims }) },
            batch,
            () => {
              counters.abandonedBatches++
            }
          )
          decided(results)
          let outboxChanged = false
          // The rows this commit may have taken out of a performer's hands (OutboxTouches): each
          // accepted settlement's row, and the rows decisions cancelled.
          const outboxTouched = touched.cancels
          const changed = new Set<string>()
          /** The aggregates whose events this batch wrote (their followers read events again). */
          const withEvents = new Set<string>()
          for (const [index, result] of results.entries()) {
            if (Exit.isSuccess(result) && !result.value.duplicate) {
              counters.committedCommands++
              const { identity } = batch[index]!
              const key = CommitHints.aggregateKey(identity.aggregateType, identity.aggregateId)
              changed.add(key)
              if (result.value.events.length > 0) withEvents.add(key)
              // Outbox rows change in three ways: a decision adds effects (its answer names them), a
              // settlement changes its row (freeing its lane, or making it pending again), a decision cancels
              // rows (`touched.cancels`, rung below). Anything else (events alone, a stream's plain chunk:
              // most of a busy engine's commits) changes no row, and ringing the reactors for it would
              // uncover them (CommitClaims' coverage) for a claim that finds nothing.
              const { settles, effectId } = batch[index]!
              if (settles || result.value.effectIds.length > 0) outboxChanged = true
              if (settles && effectId !== undefined) outboxTouched.push(effectId)
            }
          }
          // Rows claimed in the commit start first: nothing else stands between their commit and their handlers.
          if (claims !== undefined && claims.handoffs.length > 0) yield* CommitClaims.deliver(claims.handoffs, since)
          if (counters.committedCommands > committedBefore) {
            yield* (yield* FaultPoints).hit("dispatch.after-commit")
            // Before any reader is rung: the store's horizons cover this commit, or know they may not.
            yield* deps.backend.ownCommit(claims?.alone)
          }
          if (head.value > before) yield* hints.ringCommit(head.value)
          // A stream chunk's decision may cancel a row without adding one: what the batch cancelled rings
          // too, or that row's performer learns of it only at its poll.
          if (outboxChanged || touched.cancels.length > 0) {
            yield* hints.ringOutbox(outboxTouched)
            // Reactors whose claim in this commit was complete need not claim again until the touches move
            // past its ring's mark: only when nothing else was recorded since the batch began (the writer
            // permit keeps other batches out, not a foreign hint nor a reactor's direct write).
            if (claims !== undefined && hints.outboxTouches.mark() === since + 1)
              CommitClaims.cover(claims.handoffs, since + 1)
          }
          if (touched.timers) yield* hints.ringTimers
          answer(results)
          if (changed.size > 0) yield* hints.ringAggregates(changed, withEvents)
          return results
        })
      )
      .pipe(
        Effect.provideService(SqlClient, sql),
        Effect.withSpan("Engine.commitBatch", { attributes: { commands: batch.length }, captureStackTrace: false })
      )
  }

export const make = (config: EngineConfig) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const freeSpace = yield* FreeSpace
    const backend = yield* StoreBackend
    const projections = config.projections ?? []
    const maxBatch = Math.max(1, config.maxBatch ?? 64)

    yield* Lifecycle.migrateStore(projections)
    // Two aggregates declaring one command type is a wiring bug: the engine cannot start.
    const router = yield* Effect.sync(() => CommandRouter.make(config.aggregates))

    const head = { value: yield* EventLog.head.pipe(Effect.mapError(toStorageFailure("read log head"))) }
    const states = makeAggregateStates(config.cacheCapacity ?? 10_000)
    const commitWriter = yield* CommitWriter.forStore
    const hints = yield* CommitHints.make
    // Each needs the other: the queue asks whether the engine closed; the lifecycle drains the queue.
    const queue: CommandQueue.CommandQueue = yield* CommandQueue.make(
      config.queueCapacity ?? 10_000,
      () => lifecycle.phase() === "closed"
    )
    const lifecycle: Lifecycle.Lifecycle = yield* Lifecycle.make(config.beforeActivation ?? "wait", queue)
    // The processor and boot-time dispatch both write; one at a time.
    const writer = yield* Effect.makeSemaphore(1)
    const counters = { transactions: 0, abandonedBatches: 0, committedCommands: 0 }

    const tails = yield* StreamTails.StreamTails
    const commitClaims = CommitClaims.make()
    const runBatch = batchRunner({
      sql,
      writer,
      head,
      states,
      projections,
      commitWriter,
      hints,
      counters,
      tails,
      commitClaims,
      freeSpace,
      backend
    })

    const processor = Effect.gen(function* () {
      yield* lifecycle.awaitActivation
      while (true) {
        const batch = yield* queue.takeBatch(maxBatch)
        let answered = false
        let decided: ReadonlyArray<CommandResult> | undefined
        const answerAll = (results: ReadonlyArray<CommandResult>) => {
          answered = true
          batch.forEach((item, index) => queue.answer(item, results[index]!))
        }
        yield* runBatch(batch, answerAll, (results) => (decided = results)).pipe(
          // A defect outside processBatch's own guard (the probe before it, the claims handed over or the
          // horizons moved after its commit) ended this fiber: every dispatch from then on waited for ever,
          // and shutdown with them. Each command is answered (with what its batch decided, if it got that
          // far: a committed command is accepted, as its receipt says) and the processor goes on.
          Effect.catchAllCause((cause) =>
            Effect.gen(function* () {
              yield* Effect.logError(
                "a dispatch batch died; its commands are answered and the engine goes on",
                Cause.pretty(cause).slice(0, 2_000)
              )
              if (answered) return
              answerAll(decided ?? batch.map(() => Exit.fail(engineDefect(cause))))
            })
          )
        )
        // Let the clients just answered run (and send their next command) before the next take, so a
        // batch gathers every waiting client instead of the first one scheduled (group commit).
        yield* Effect.yieldNow()
      }
    })
    yield* Effect.forkScoped(processor)
    yield* Effect.forkScoped(
      CommitHints.forwardForeign(hints, head, backend.foreignCommitHints).pipe(Effect.provideService(SqlClient, sql))
    )

    const reads = ReadSide.make({
      sql,
      aggregate: router.aggregate,
      subscribeCommits: hints.subscribeCommits,
      subscribeAggregate: hints.subscribeAggregate,
      tails,
      horizon: backend.horizon
    })

    /**
     * Below the floor a client command is admitted only if it writes nothing: a replay, answered from
     * its stored receipt. Every other client command writes at least a receipt (a no-op or a rejection
     * too), so it is refused; the room left is for settles of running work, reconcile and operators.
     */
    const replayOnly = (command: QueuedCommand, space: { readonly freeBytes: number; readonly floorBytes: number }) =>
      Effect.flatMap(reads.receipt(command.identity.commandId), (found) =>
        Option.isSome(found) ? queue.enqueue(command) : Effect.fail(belowFloor(space))
      )

    // Few Effect steps and no span on purpose: this runs once per command, and a span alone cost
    // ≈ 10 µs of it (docs/benchmarks.md). The HTTP edge traces each request; batches have a span.
    const dispatchWithReceipt = (input: unknown, options?: DispatchOptions) =>
      Effect.suspend((): Effect.Effect<DispatchAnswer, DispatchError> => {
        const origin = options?.origin ?? "client"
        const command = router.route(input, origin)
        if (command instanceof InvalidCommand) return Effect.fail(command)
        const refused = lifecycle.admit(origin)
        if (refused !== undefined) return Effect.fail(refused)
        if (origin === "client") {
          return Effect.flatMap(freeSpace.check, (space) =>
            space.belowFloor ? replayOnly(command, space) : queue.enqueue(command)
          )
        }
        return queue.enqueue(command)
      })

    /** Boot-time commands in group-committed batches (reconcile settles thousands of rows this way). */
    const dispatchManyDuringBoot = Effect.fn("Engine.dispatchManyDuringBoot")(function* (
      inputs: ReadonlyArray<unknown>
    ) {
      if (lifecycle.phase() !== "parked")
        return yield* Effect.dieMessage("dispatchDuringBoot is only for boot, before activation")
      const { results, prepared } = routeForBoot(router, inputs)
      for (let start = 0; start < prepared.length; start += BOOT_BATCH) {
        const chunk = prepared.slice(start, start + BOOT_BATCH)
        const answers = yield* runBatch(chunk.map((p) => p.command))
        chunk.forEach((p, i) => (results[p.index] = answers[i]!))
      }
      return results
    })

    yield* Effect.addFinalizer(() => lifecycle.shutdown)
    if (config.activation !== "manual") yield* lifecycle.activate

    return Engine.of({
      dispatchWithReceipt,
      dispatchDuringBoot: (input) => Effect.flatMap(dispatchManyDuringBoot([input]), (results) => results[0]!),
      dispatchManyDuringBoot,
      awaitActivation: lifecycle.awaitActivation,
      isActive: Effect.sync(() => lifecycle.phase() === "open"),
      stopAdmitting: lifecycle.stopAdmitting,
      outboxChanges: hints.outboxChanges,
      outboxTouches: hints.outboxTouches,
      outboxWritten: (effectIds) =>
        Effect.zipRight(hints.ringOutbox(effectIds), notifyOthersOfRowWrite(backend)).pipe(
          Effect.provideService(SqlClient, sql)
        ),
      timerChanges: hints.timerChanges,
      aggregateChanges: (aggregateType, aggregateId) =>
        Effect.map(hints.subscribeAggregate(aggregateType, aggregateId), Stream.fromQueue),
      ringAggregate: (aggregateType, aggregateId) =>
        hints
          .ringAggregates([CommitHints.aggregateKey(aggregateType, aggregateId)])
          .pipe(
            Effect.zipRight(backend.notifyOthers),
            Effect.mapError(toStorageFailure("notify other processes")),
            Effect.provideService(SqlClient, sql)
          ),
      followAggregate: hints.followAggregate,
      claimAtCommit: commitClaims.register,
      aggregate: router.aggregate,
      releaseAggregate: (aggregateType, aggregateId) =>
        Effect.sync(() => {
          states.release(keyOf(aggregateType, aggregateId))
        }),
      receipt: reads.receipt,
      readEvents: reads.readEvents,
      followEvents: reads.followEvents,
      decode: reads.decode,
      readStreamChunks: reads.readStreamChunks,
      followStreamChunks: reads.followStreamChunks,
      rebuildProjections: Projection.rebuild(projections, reads.decode).pipe(Effect.provideService(SqlClient, sql)),
      activate: lifecycle.activate,
      shutdown: lifecycle.shutdown,
      stats: Effect.map(queue.size, (size) => ({
        ...counters,
        queueDepth: Math.max(0, size),
        cachedAggregates: states.size(),
        quarantinedAggregates: states.quarantinedCount(),
        head: head.value
      })),
      commits: hints.commits
    })
  })

/**
 * The engine over an already-provided SqlClient (see storage/SqliteStore for the embedded store),
 * with the flush windows its streams share (FlushWindows) and the tails of the streams it writes
 * (StreamTails: kept only where this process is the store's one writer).
 */
export const layer = (config: EngineConfig) =>
  Layer.merge(Layer.scoped(Engine, make(config)).pipe(Layer.provideMerge(StreamTails.layer)), FlushWindows.layer)
