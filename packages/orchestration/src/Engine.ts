/**
 * The engine service: the one front door (`dispatchWithReceipt`), the reads of the log, and the
 * lifecycle (parked until activated, drained on shutdown). It owns the bounded command queue and
 * the single processor fiber; see Processor.ts for what one commit holds.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import {
  Cause,
  Chunk,
  Context,
  Deferred,
  Effect,
  Either,
  Exit,
  FiberId,
  Layer,
  Option,
  ParseResult,
  PubSub,
  Queue,
  Schedule,
  Schema,
  Stream
} from "effect"
import type { AnyAggregate, EventRecord } from "./Aggregate.js"
import { decodeEvent, keyOf, makeAggregateStates } from "./AggregateStates.js"
import { fingerprint } from "./CanonicalJson.js"
import { commandIdProblem, isReservedType, type Origin } from "./CommandId.js"
import {
  CommandIdConflict,
  CommandRejected,
  EngineUnavailable,
  InvalidCommand,
  StorageFailure,
  type DispatchError,
  type UndecodableEvent
} from "./Errors.js"
import * as EventLog from "./EventLog.js"
import { FaultPoints } from "./FaultPoints.js"
import { FreeSpace } from "./FreeSpace.js"
import { settlementSchemas, type SettlementCommand } from "./EffectOutcomes.js"
import {
  decideCommand,
  decideSettlementCommand,
  processBatch,
  type CommandResult,
  type DispatchAnswer,
  type QueuedCommand
} from "./Processor.js"
import { handles, type Projection } from "./Projection.js"
import * as Receipts from "./Receipts.js"
import * as CommitWriter from "./storage/CommitWriter.js"
import { migrate } from "./storage/Migrations.js"
import { toStorageFailure } from "./storage/StorageErrors.js"
import { StoreBackend } from "./storage/StoreBackend.js"
import { writeTransaction } from "./storage/Transactions.js"

export type { DispatchAnswer } from "./Processor.js"

export interface EngineConfig {
  readonly aggregates: ReadonlyArray<AnyAggregate>
  readonly projections?: ReadonlyArray<Projection>
  /** Most commands one transaction takes (group commit). Default 64; 1 turns group commit off. */
  readonly maxBatch?: number
  /** Queued commands beyond this are refused with EngineUnavailable (overloaded). Default 10,000. */
  readonly queueCapacity?: number
  /** Aggregates whose state is kept in memory. Default 10,000. */
  readonly cacheCapacity?: number
  /** `wait` (default): a dispatch before activation is queued and runs once activated; `fail`: EngineUnavailable. */
  readonly beforeActivation?: "wait" | "fail"
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

export interface ReadEventsOptions {
  readonly after?: number
  readonly limit?: number
  readonly aggregateId?: string
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
  /** A hint after every commit that added or settled outbox rows. */
  readonly outboxChanges: PubSub.PubSub<void>
  readonly aggregate: (name: string) => AnyAggregate | undefined
  /**
   * Forgets that this aggregate's log could not be replayed (an operator repaired it and releases a
   * quarantined effect): its next command replays the log again instead of being refused at once.
   */
  readonly releaseAggregate: (aggregateType: string, aggregateId: string) => Effect.Effect<void>
  readonly receipt: (commandId: string) => Effect.Effect<Option.Option<Receipts.Receipt>, StorageFailure>
  readonly readEvents: (options?: ReadEventsOptions) => Effect.Effect<ReadonlyArray<EventRecord>, StorageFailure>
  /** Catches up from the table, then follows new commits: every event once, in order. */
  readonly followEvents: (options?: {
    readonly after?: number
    readonly aggregateId?: string
  }) => Stream.Stream<EventRecord, StorageFailure>
  /** Decodes a stored event with its aggregate's schema. */
  readonly decode: (record: EventRecord) => Effect.Effect<unknown, UndecodableEvent>
  /** Empties every projection and replays the whole log into them, in one transaction. */
  readonly rebuildProjections: Effect.Effect<number, StorageFailure | UndecodableEvent>
  readonly activate: Effect.Effect<void>
  /**
   * Refuses client commands, waits until no command is queued or in a batch (internal settlements
   * are still admitted meanwhile), then refuses everything. Idempotent; also run at scope close.
   */
  readonly shutdown: Effect.Effect<void>
  readonly stats: Effect.Effect<EngineStats>
  /** A hint after every commit that wrote events (the last sequence). Never data: read the log. */
  readonly commits: PubSub.PubSub<number>
}

export class Engine extends Context.Tag("orchestration/Engine")<Engine, EngineShape>() {}

/** parked: built, not activated; open; draining: refusing clients, finishing queued work; closed. */
type Phase = "parked" | "open" | "draining" | "closed"

interface InFlight {
  readonly identity: Receipts.CommandIdentity
  readonly done: Deferred.Deferred<DispatchAnswer, DispatchError>
}

interface Queued extends QueuedCommand {
  readonly done: Deferred.Deferred<DispatchAnswer, DispatchError>
}

const formatIssues = (error: ParseResult.ParseError) =>
  ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) => ({
    path: issue.path.map(String),
    message: issue.message
  }))

const identityOf = (
  raw: Record<string, unknown>,
  aggregate: AnyAggregate,
  aggregateId: string
): Receipts.CommandIdentity => ({
  commandId: raw.commandId as string,
  aggregateType: aggregate.name,
  aggregateId,
  commandType: raw.type as string,
  fingerprint: fingerprint(raw)
})

const invalid = (message: string, commandId?: string, issues: InvalidCommand["issues"] = []) =>
  new InvalidCommand({ message, issues, ...(typeof commandId === "string" ? { commandId } : {}) })

/**
 * Boot-time commands per transaction. Nothing else runs at boot, so a long transaction delays nobody,
 * and each COMMIT saved is an fsync saved (reconcile settles its rows 500 at a time).
 */
const BOOT_BATCH = 512

export const make = (config: EngineConfig) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const freeSpace = yield* FreeSpace
    const projections = config.projections ?? []
    const maxBatch = Math.max(1, config.maxBatch ?? 64)

    const backend = yield* StoreBackend
    // On a shared store several processes may boot at once; one migrates and sets up at a time.
    yield* backend
      .exclusively(
        "migrate",
        Effect.gen(function* () {
          yield* migrate.pipe(Effect.mapError(toStorageFailure("migrate")))
          for (const projection of projections) {
            yield* projection.setup.pipe(Effect.mapError(toStorageFailure(`setup projection ${projection.name}`)))
          }
        })
      )
      .pipe(Effect.mapError(toStorageFailure("migrate")))

    type Decoder = (raw: unknown) => Either.Either<any, ParseResult.ParseError>
    const decoderOf = (schema: Schema.Schema<any, any, never>): Decoder =>
      Schema.decodeUnknownEither(schema, { onExcessProperty: "error" })
    const routes = new Map<string, { aggregate: AnyAggregate; decode: Decoder }>()
    const settlementDecoders = new Map<string, Decoder>(
      Object.entries(settlementSchemas as Record<string, Schema.Schema<any, any, never>>).map(([type, schema]) => [
        type,
        decoderOf(schema)
      ])
    )
    const aggregatesByName = new Map<string, AnyAggregate>()
    for (const aggregate of config.aggregates) {
      aggregatesByName.set(aggregate.name, aggregate)
      for (const [type, schema] of Object.entries(aggregate.commands)) {
        if (routes.has(type)) return yield* Effect.dieMessage(`command type '${type}' is declared by two aggregates`)
        routes.set(type, { aggregate, decode: decoderOf(schema) })
      }
    }

    const head = { value: yield* EventLog.head.pipe(Effect.mapError(toStorageFailure("read log head"))) }
    const states = makeAggregateStates(config.cacheCapacity ?? 10_000)
    const commitWriter = yield* CommitWriter.forStore
    const queue = yield* Queue.dropping<Queued>(config.queueCapacity ?? 10_000)
    const commits = yield* PubSub.sliding<number>(1)
    const outboxChanges = yield* PubSub.sliding<void>(1)
    const inFlight = new Map<string, InFlight>()
    const activated = yield* Deferred.make<void>()
    // The processor and boot-time dispatch both write; one at a time.
    const writer = yield* Effect.makeSemaphore(1)
    let phase: Phase = "parked"
    // Whether the processor was ever released: if not, queued commands can only be refused.
    let started = false
    // Commands queued or in a batch and not yet answered. Drained means zero, then close: a batch
    // that empties the queue is not the end of the drain while settlements of running work arrive.
    let unanswered = 0
    let idle: Deferred.Deferred<void> | undefined
    const counters = { transactions: 0, abandonedBatches: 0, committedCommands: 0 }

    /** Answers one queued command (synchronously: this runs for every command of every batch). */
    const answer = (item: Queued, result: CommandResult) => {
      if (inFlight.get(item.identity.commandId)?.done === item.done) inFlight.delete(item.identity.commandId)
      Deferred.unsafeDone(item.done, result)
      unanswered--
      if (unanswered === 0 && idle !== undefined) {
        Deferred.unsafeDone(idle, Exit.void)
        idle = undefined
      }
    }
    const deliver = (item: Queued, result: CommandResult) => Effect.sync(() => answer(item, result))

    /** Commits a batch and rings whoever waits on what it changed. */
    const runBatch = (batch: ReadonlyArray<QueuedCommand>) =>
      writer
        .withPermits(1)(
          Effect.gen(function* () {
            const before = head.value
            const committedBefore = counters.committedCommands
            counters.transactions++
            const results = yield* processBatch({ states, projections, head, writer: commitWriter }, batch, () => {
              counters.abandonedBatches++
            })
            let outboxChanged = false
            for (const result of results) {
              if (Exit.isSuccess(result) && !result.value.duplicate) {
                counters.committedCommands++
                // Any accepted command may have added, cancelled or settled outbox rows (freeing a lane).
                outboxChanged = true
              }
            }
            if (counters.committedCommands > committedBefore) yield* (yield* FaultPoints).hit("dispatch.after-commit")
            if (head.value > before) yield* PubSub.publish(commits, head.value)
            if (outboxChanged) yield* PubSub.publish(outboxChanges, undefined)
            return results
          })
        )
        .pipe(
          Effect.provideService(SqlClient, sql),
          Effect.withSpan("Engine.commitBatch", { attributes: { commands: batch.length }, captureStackTrace: false })
        )

    const processor = Effect.gen(function* () {
      yield* Deferred.await(activated)
      while (true) {
        const batch = Chunk.toReadonlyArray(yield* Queue.takeBetween(queue, 1, maxBatch))
        const results = yield* runBatch(batch)
        yield* Effect.sync(() => batch.forEach((item, index) => answer(item, results[index]!)))
        // Let the clients just answered run (and send their next command) before the next take, so a
        // batch gathers every waiting client instead of the first one scheduled (group commit).
        yield* Effect.yieldNow()
      }
    })

    yield* Effect.forkScoped(processor)

    // Other processes' commits (shared store): wake followers and reactors here as our own commits do.
    // The hint is only a wake-up; readers re-read the table, and reactors also poll for liveness. A
    // failed LISTEN is re-opened; a store without other processes gives an empty stream, which ends here.
    yield* Effect.forkScoped(
      backend.foreignCommitHints.pipe(
        Stream.tapError((error) =>
          Effect.logWarning("commit hints from other processes stopped; retrying (reactors still poll)", error)
        ),
        Stream.retry(Schedule.spaced("1 second")),
        Stream.runForEach(() =>
          PubSub.publish(commits, head.value).pipe(Effect.zipRight(PubSub.publish(outboxChanges, undefined)))
        ),
        Effect.provideService(SqlClient, sql)
      )
    )

    /** Validates and routes a command, synchronously: the typed refusal, or the command to queue. */
    const prepare = (input: unknown, origin: Origin): QueuedCommand | InvalidCommand => {
      if (typeof input !== "object" || input === null || Array.isArray(input)) {
        return invalid("a command is a JSON object with commandId and type")
      }
      const raw = input as Record<string, unknown>
      const idProblem = commandIdProblem(raw.commandId, origin)
      const commandId = typeof raw.commandId === "string" ? raw.commandId : undefined
      if (idProblem !== undefined) return invalid(idProblem, commandId)
      if (typeof raw.type !== "string") return invalid("type must be a string", commandId)
      if (origin === "client" && isReservedType(raw.type)) {
        return invalid(`command type '${raw.type}' is internal to the engine`, commandId)
      }
      const decodeSettlement = settlementDecoders.get(raw.type)
      if (decodeSettlement !== undefined) {
        const decoded = decodeSettlement(raw)
        if (Either.isLeft(decoded))
          return invalid(`invalid '${raw.type}' command`, commandId, formatIssues(decoded.left))
        const settlement: SettlementCommand = decoded.right
        const aggregate = aggregatesByName.get(settlement.aggregateType)
        if (aggregate === undefined) return invalid(`no aggregate named '${settlement.aggregateType}'`, commandId)
        const identity = identityOf(raw, aggregate, settlement.aggregateId)
        return {
          identity,
          aggregate,
          decide: decideSettlementCommand(aggregate, identity, settlement),
          settles: true
        } satisfies QueuedCommand
      }
      const route = routes.get(raw.type)
      if (route === undefined) return invalid(`unknown command type '${raw.type}'`, commandId)
      const decoded = route.decode(raw)
      if (Either.isLeft(decoded)) return invalid(`invalid '${raw.type}' command`, commandId, formatIssues(decoded.left))
      let aggregateId: string
      try {
        aggregateId = route.aggregate.aggregateId(decoded.right)
      } catch (error) {
        return invalid(`cannot tell the aggregate of this command: ${String(error)}`, commandId)
      }
      const identity = identityOf(raw, route.aggregate, aggregateId)
      return {
        identity,
        aggregate: route.aggregate,
        decide: decideCommand(route.aggregate, identity, decoded.right),
        settles: false
      } satisfies QueuedCommand
    }

    /** Clients wait (or are refused) until activation and are refused once draining starts. */
    const admission = (origin: Origin): EngineUnavailable | undefined => {
      switch (phase) {
        case "open":
          return undefined
        case "parked":
          // `wait`: the command is queued now and runs when the processor is released.
          return origin === "client" && config.beforeActivation === "fail"
            ? new EngineUnavailable({ reason: "not-activated", message: "the engine is starting; retry shortly" })
            : undefined
        case "draining":
          // Settlements of effects still running are let through so running work can finish.
          return origin === "internal"
            ? undefined
            : new EngineUnavailable({ reason: "shutting-down", message: "the engine is shutting down" })
        case "closed":
          return new EngineUnavailable({ reason: "shutting-down", message: "the engine is shutting down" })
      }
    }

    /** Same id in flight: coalesce onto the first instead of racing it to the receipt. */
    const coalesce = (command: QueuedCommand, running: InFlight): Effect.Effect<DispatchAnswer, DispatchError> =>
      Effect.gen(function* () {
        const id = command.identity.commandId
        const conflict = Receipts.conflictWith(running.identity, command.identity)
        if (conflict !== undefined)
          return yield* Effect.fail(new CommandIdConflict({ commandId: id, message: conflict }))
        const first = yield* Effect.exit(Deferred.await(running.done))
        if (Exit.isSuccess(first)) return { ...first.value, duplicate: true }
        const error = Option.getOrUndefined(Cause.failureOption(first.cause))
        if (error instanceof CommandRejected) {
          return yield* Effect.fail(
            new CommandRejected({
              commandId: error.commandId,
              aggregateType: error.aggregateType,
              aggregateId: error.aggregateId,
              reason: error.reason,
              message: error.message,
              duplicate: true
            })
          )
        }
        if (!(error instanceof StorageFailure)) return yield* first
        // The first attempt never committed; this one tries for itself.
        return yield* enqueue(command)
      })

    // Synchronous queueing (unsafeMake/unsafeOffer): a handful of Effect steps less per command.
    const enqueue = (command: QueuedCommand): Effect.Effect<DispatchAnswer, DispatchError> =>
      Effect.suspend(() => {
        const id = command.identity.commandId
        const running = inFlight.get(id)
        if (running !== undefined) return coalesce(command, running)
        // A client admitted while open may get here after the drain ended (its free-space check is async).
        if (phase === "closed")
          return Effect.fail(new EngineUnavailable({ reason: "shutting-down", message: "the engine is shutting down" }))
        const done = Deferred.unsafeMake<DispatchAnswer, DispatchError>(FiberId.none)
        inFlight.set(id, { identity: command.identity, done })
        if (!queue.unsafeOffer({ ...command, done })) {
          inFlight.delete(id)
          return Effect.fail(
            new EngineUnavailable({ reason: "overloaded", message: "the command queue is full; retry shortly" })
          )
        }
        unanswered++
        return Deferred.await(done)
      })

    const belowFloor = (space: { readonly freeBytes: number; readonly floorBytes: number }) =>
      new EngineUnavailable({
        reason: "storage-below-floor",
        message: `the data volume has ${space.freeBytes} bytes free, below the floor of ${space.floorBytes}; new work is refused until space returns`
      })

    /**
     * Below the floor a client command is admitted only if it writes nothing: a replay, answered from
     * its stored receipt. Every other client command writes at least a receipt (a no-op or a rejection
     * too), so it is refused; the room left is for settles of running work, reconcile and operators.
     */
    const replayOnly = (command: QueuedCommand, space: { readonly freeBytes: number; readonly floorBytes: number }) =>
      Effect.flatMap(receipt(command.identity.commandId), (found) =>
        Option.isSome(found) ? enqueue(command) : Effect.fail(belowFloor(space))
      )

    // Few Effect steps and no span on purpose: this runs once per command, and a span alone cost
    // ≈ 10 µs of it (docs/benchmarks.md). The HTTP edge traces each request; batches have a span.
    const dispatchWithReceipt = (input: unknown, options?: DispatchOptions) =>
      Effect.suspend((): Effect.Effect<DispatchAnswer, DispatchError> => {
        const origin = options?.origin ?? "client"
        const command = prepare(input, origin)
        if (command instanceof InvalidCommand) return Effect.fail(command)
        const refused = admission(origin)
        if (refused !== undefined) return Effect.fail(refused)
        if (origin === "client") {
          return Effect.flatMap(freeSpace.check, (space) =>
            space.belowFloor ? replayOnly(command, space) : enqueue(command)
          )
        }
        return enqueue(command)
      })

    const dispatchDuringBoot = (input: unknown) =>
      Effect.flatMap(dispatchManyDuringBoot([input]), (results) => results[0]!)

    /** Boot-time commands in group-committed batches (reconcile settles thousands of rows this way). */
    const dispatchManyDuringBoot = (inputs: ReadonlyArray<unknown>) =>
      Effect.gen(function* () {
        if (phase !== "parked")
          return yield* Effect.dieMessage("dispatchDuringBoot is only for boot, before activation")
        const results: Array<CommandResult> = []
        const prepared: Array<{ readonly index: number; readonly command: QueuedCommand }> = []
        for (const [index, input] of inputs.entries()) {
          // A throw while preparing one command (a defect) is that command's answer, not the batch's.
          let command: QueuedCommand | InvalidCommand
          try {
            command = prepare(input, "internal")
          } catch (error) {
            results[index] = Exit.die(error)
            continue
          }
          if (command instanceof InvalidCommand) results[index] = Exit.fail(command)
          else prepared.push({ index, command })
        }
        for (let start = 0; start < prepared.length; start += BOOT_BATCH) {
          const chunk = prepared.slice(start, start + BOOT_BATCH)
          const answers = yield* runBatch(chunk.map((p) => p.command))
          chunk.forEach((p, i) => (results[p.index] = answers[i]!))
        }
        return results
      }).pipe(Effect.withSpan("Engine.dispatchManyDuringBoot"))

    const readEvents = (options: ReadEventsOptions = {}) =>
      EventLog.read({
        after: options.after ?? 0,
        limit: Math.min(Math.max(options.limit ?? 100, 1), 10_000),
        aggregateId: options.aggregateId
      }).pipe(Effect.mapError(toStorageFailure("read events")), Effect.provideService(SqlClient, sql))

    const followEvents = (options: { readonly after?: number; readonly aggregateId?: string } = {}) =>
      Stream.unwrapScoped(
        Effect.gen(function* () {
          // Subscribe before the first read: a commit between the read and the wait still rings.
          const hints = yield* PubSub.subscribe(commits)
          let cursor = options.after ?? 0
          const next = Effect.gen(function* () {
            while (true) {
              const page = yield* readEvents({
                after: cursor,
                limit: 500,
                ...(options.aggregateId ? { aggregateId: options.aggregateId } : {})
              })
              if (page.length > 0) {
                cursor = page[page.length - 1]!.sequence
                return Chunk.fromIterable(page)
              }
              yield* Queue.take(hints)
            }
          })
          return Stream.repeatEffectChunk(next)
        })
      )

    const decode = (record: EventRecord) => {
      const aggregate = aggregatesByName.get(record.aggregateType)
      if (aggregate === undefined)
        return Effect.dieMessage(`no aggregate named '${record.aggregateType}' is registered`)
      return decodeEvent(aggregate, record)
    }

    const rebuildProjections = writeTransaction(
      "rebuild projections",
      Effect.gen(function* () {
        for (const projection of projections) yield* projection.reset
        let cursor = 0
        let applied = 0
        while (true) {
          const page = yield* EventLog.read({ after: cursor, limit: 1000 })
          if (page.length === 0) return applied
          for (const record of page) {
            const event = yield* decode(record)
            for (const projection of projections) {
              if (handles(projection, record)) yield* projection.apply(event, record)
            }
            applied++
          }
          cursor = page[page.length - 1]!.sequence
        }
      })
    ).pipe(Effect.provideService(SqlClient, sql))

    const activate = Effect.suspend(() => {
      if (phase !== "parked") return Effect.void
      phase = "open"
      started = true
      return Deferred.succeed(activated, undefined)
    })

    const stopAdmitting = Effect.suspend(() => {
      if (phase === "open" || phase === "parked") phase = "draining"
      return Effect.void
    })

    /**
     * Drains, then closes. Drained means no command queued or in a batch: internal commands (the
     * settlements of effects still running) are admitted and waited for until then. The check and
     * the close happen in one step, so nothing is admitted between them. An engine never activated
     * has no processor to wait for: it closes at once and refuses what was queued.
     */
    const shutdown = Effect.gen(function* () {
      if (phase === "closed") return
      phase = "draining"
      while (started && unanswered > 0) {
        idle ??= Deferred.unsafeMake<void>(FiberId.none)
        yield* Deferred.await(idle)
      }
      phase = "closed"
      // Anything still queued (only possible if never activated) is told, never left waiting.
      const left = yield* Queue.takeAll(queue)
      yield* Effect.forEach(
        left,
        (item) =>
          deliver(
            item,
            Exit.fail(
              new EngineUnavailable({
                reason: "shutting-down",
                message: "the engine shut down before this command ran"
              })
            )
          ),
        { discard: true }
      )
    })

    yield* Effect.addFinalizer(() => shutdown)

    const stats = Effect.gen(function* () {
      return {
        ...counters,
        queueDepth: Math.max(0, yield* Queue.size(queue)),
        cachedAggregates: states.size(),
        quarantinedAggregates: states.quarantinedCount(),
        head: head.value
      } satisfies EngineStats
    })

    const receipt = (commandId: string) =>
      Receipts.findOne(commandId).pipe(
        Effect.map(Option.fromNullable),
        Effect.mapError(toStorageFailure("read receipt")),
        Effect.provideService(SqlClient, sql)
      )

    if (config.activation !== "manual") yield* activate

    return Engine.of({
      dispatchWithReceipt,
      dispatchDuringBoot,
      dispatchManyDuringBoot,
      awaitActivation: Deferred.await(activated),
      isActive: Effect.sync(() => phase === "open"),
      stopAdmitting,
      outboxChanges,
      aggregate: (name: string) => aggregatesByName.get(name),
      releaseAggregate: (aggregateType: string, aggregateId: string) =>
        Effect.sync(() => {
          states.release(keyOf(aggregateType, aggregateId))
        }),
      receipt,
      readEvents,
      followEvents,
      decode,
      rebuildProjections,
      activate,
      shutdown,
      stats,
      commits
    })
  })

/** The engine over an already-provided SqlClient (see storage/SqliteStore for the embedded store). */
export const layer = (config: EngineConfig) => Layer.scoped(Engine, make(config))
