/**
 * The bounded queue between the front door and the processor. Its rule: a command whose id is
 * already queued or in a batch is coalesced onto the first instead of racing it to the receipt
 * (same identity: the first's answer, marked duplicate; another identity: CommandIdConflict). It
 * also counts the commands not yet answered, so shutdown can wait until none is left.
 *
 * Queueing and answering are synchronous (unsafeMake/unsafeOffer/unsafeDone): they run for every
 * command, and each Effect step saved there is saved per command.
 */
import { Cause, Chunk, Deferred, Effect, Exit, FiberId, Option, Queue } from "effect"
import { CommandIdConflict, CommandRejected, EngineUnavailable, StorageFailure, type DispatchError } from "./Errors.js"
import type { CommandResult, DispatchAnswer, QueuedCommand } from "./Processor.js"
import { OneShot } from "./OneShot.js"
import * as Receipts from "./Receipts.js"

/** A queued command with the answer its dispatcher waits for. */
export interface Queued extends QueuedCommand {
  readonly done: OneShot<DispatchAnswer, DispatchError>
}

interface InFlight {
  readonly identity: Receipts.CommandIdentity
  readonly done: OneShot<DispatchAnswer, DispatchError>
}

export interface CommandQueue {
  /** Queues the command (or coalesces it onto the one in flight) and waits for its answer. */
  readonly enqueue: (command: QueuedCommand) => Effect.Effect<DispatchAnswer, DispatchError>
  /** The next batch: at least one command, at most `max`, waiting while the queue is empty. */
  readonly takeBatch: (max: number) => Effect.Effect<ReadonlyArray<Queued>>
  /** Answers one command taken from the queue. */
  readonly answer: (item: Queued, result: CommandResult) => void
  /** Commands queued or in a batch and not yet answered. */
  readonly unanswered: () => number
  /** Resolves the next time no command is left unanswered. */
  readonly idle: () => Effect.Effect<void>
  /** Answers every command still queued with this failure (only at close). */
  readonly refuseQueued: (error: DispatchError) => Effect.Effect<void>
  readonly size: Effect.Effect<number>
}

const shuttingDown = () => new EngineUnavailable({ reason: "shutting-down", message: "the engine is shutting down" })

/** `isClosed` is asked on every enqueue: a closed engine queues nothing more. */
export const make = (capacity: number, isClosed: () => boolean): Effect.Effect<CommandQueue> =>
  Effect.gen(function* () {
    const queue = yield* Queue.dropping<Queued>(capacity)
    const inFlight = new Map<string, InFlight>()
    // Drained means zero, then close: a batch that empties the queue is not the end of the drain
    // while settlements of running work arrive.
    let unanswered = 0
    let idle: Deferred.Deferred<void> | undefined

    const answer = (item: Queued, result: CommandResult) => {
      if (inFlight.get(item.identity.commandId)?.done === item.done) inFlight.delete(item.identity.commandId)
      item.done.complete(result)
      unanswered--
      if (unanswered === 0 && idle !== undefined) {
        Deferred.unsafeDone(idle, Exit.void)
        idle = undefined
      }
    }

    /** Same id in flight: coalesce onto the first instead of racing it to the receipt. */
    const coalesce = (command: QueuedCommand, running: InFlight): Effect.Effect<DispatchAnswer, DispatchError> =>
      Effect.gen(function* () {
        const id = command.identity.commandId
        const conflict = Receipts.conflictWith(running.identity, command.identity)
        if (conflict !== undefined) return yield* new CommandIdConflict({ commandId: id, message: conflict })
        const first = yield* Effect.exit(running.done.await)
        if (Exit.isSuccess(first)) return { ...first.value, duplicate: true }
        const error = Option.getOrUndefined(Cause.failureOption(first.cause))
        if (error instanceof CommandRejected) {
          return yield* new CommandRejected({
            commandId: error.commandId,
            aggregateType: error.aggregateType,
            aggregateId: error.aggregateId,
            reason: error.reason,
            message: error.message,
            duplicate: true
          })
        }
        if (!(error instanceof StorageFailure)) return yield* first
        // The first attempt never committed; this one tries for itself.
        return yield* enqueue(command)
      })

    const enqueue = (command: QueuedCommand): Effect.Effect<DispatchAnswer, DispatchError> =>
      Effect.suspend(() => {
        const id = command.identity.commandId
        const running = inFlight.get(id)
        if (running !== undefined) return coalesce(command, running)
        // A client admitted while open may get here after the drain ended (its free-space check is async).
        if (isClosed()) return Effect.fail(shuttingDown())
        const done = new OneShot<DispatchAnswer, DispatchError>()
        inFlight.set(id, { identity: command.identity, done })
        if (!queue.unsafeOffer({ ...command, done })) {
          inFlight.delete(id)
          return Effect.fail(
            new EngineUnavailable({ reason: "overloaded", message: "the command queue is full; retry shortly" })
          )
        }
        unanswered++
        return done.await
      })

    return {
      enqueue,
      // `takeBetween(1, max)` on an empty queue answers with the one command that woke it, however
      // many were offered before this fiber ran: take those too, or they wait for the next commit.
      takeBatch: (max) =>
        Effect.flatMap(Queue.takeBetween(queue, 1, max), (first) =>
          first.length >= max
            ? Effect.succeed(Chunk.toReadonlyArray(first))
            : Effect.map(Queue.takeUpTo(queue, max - first.length), (rest) =>
                Chunk.toReadonlyArray(Chunk.appendAll(first, rest))
              )
        ),
      answer,
      unanswered: () => unanswered,
      idle: () =>
        Effect.suspend(() => {
          idle ??= Deferred.unsafeMake<void>(FiberId.none)
          return Deferred.await(idle)
        }),
      refuseQueued: (error) =>
        Effect.flatMap(Queue.takeAll(queue), (left) =>
          Effect.sync(() => {
            for (const item of left) answer(item, Exit.fail(error))
          })
        ),
      size: Queue.size(queue)
    }
  })
