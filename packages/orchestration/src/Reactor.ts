/**
 * A reactor performs effects. It tails the committed outbox (never memory), claims due rows of its
 * kinds with a lease, performs each OUTSIDE any transaction while renewing the lease, and settles it
 * by dispatching an outcome command through the front door. A crash at any instant delays work and
 * never loses it: the row stays committed, and boot reconcile or a live peer settles it by policy.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import {
  Cause,
  Clock,
  type Context,
  Duration,
  Effect,
  Either,
  Exit,
  Fiber,
  FiberMap,
  Layer,
  Option,
  Queue,
  type Scope,
  Stream
} from "effect"
import * as Alarm from "./Alarm.js"
import * as CancelWatch from "./CancelWatch.js"
import { outcomeId } from "./EffectOutcomes.js"
import { Engine, type EngineShape } from "./Engine.js"
import { FaultPoints } from "./FaultPoints.js"
import { FreeSpace } from "./FreeSpace.js"
import { OneShot } from "./OneShot.js"
import * as Outbox from "./Outbox.js"
import * as ReactorCursors from "./ReactorCursors.js"
import { toStorageFailure } from "./storage/StorageErrors.js"
import * as CommitHorizon from "./storage/CommitHorizon.js"
import { StoreBackend } from "./storage/StoreBackend.js"
import * as TableChanges from "./storage/TableChanges.js"
import { type KindPolicy, processLossOf, reclaimDeadOwners, settleOutcome } from "./ReactorSettlement.js"
import { defaultRetry, type EffectFailure, type RetryPolicy, TimedOut, verdictFor } from "./EffectVerdicts.js"
import { Worker } from "./Worker.js"

export { type KindPolicy, ProcessLossPolicy, processLossOf, type Verdict } from "./ReactorSettlement.js"
export {
  backoffMillis,
  defaultRetry,
  EffectFailure,
  payloadOf,
  type RetryPolicy,
  verdictFor
} from "./EffectVerdicts.js"

export interface ReactorDefinition<R = never> {
  readonly name: string
  readonly kinds: { readonly [kind: string]: KindPolicy }
  /** Rows performed at once, across lanes. Default 1. */
  readonly concurrency?: number
  /** Lease length; renewed every third of it. Default 30 seconds. */
  readonly lease?: Duration.DurationInput
  readonly retry?: Partial<RetryPolicy>
  /** The liveness poll that covers missed doorbell rings. Default 1 second. */
  readonly pollInterval?: Duration.DurationInput
  /** The poll behind the cancel ring (CancelWatch.ts). Default 500 ms; tests that move the clock by hours lengthen it. */
  readonly cancelPollInterval?: Duration.DurationInput
  /** At shutdown, how long in-flight handlers may take to finish and settle. Default 10 seconds. */
  readonly shutdownGrace?: Duration.DurationInput
  readonly handle: (row: Outbox.OutboxRow) => Effect.Effect<unknown, EffectFailure, R>
}

export const make = <R>(definition: ReactorDefinition<R>): ReactorDefinition<R> => definition

/** How a performance ended (see `perform`). */
type Ending = Exit.Exit<unknown, EffectFailure> | "lease-lost" | "timed-out"

export interface ReactorHandle {
  readonly name: string
  /** Rows being performed right now. */
  readonly inFlight: Effect.Effect<number>
}

/** What every performance of one reactor shares, built once by `run`. */
interface PerformEnv<R> {
  readonly definition: ReactorDefinition<R>
  readonly engine: EngineShape
  readonly ownerId: string
  readonly context: Context.Context<SqlClient | R>
  readonly cancels: CancelWatch.CancelWatchShape
  readonly retry: RetryPolicy
  readonly leaseMs: number
  /** Rung when a performance ends, so the loop claims again. */
  readonly wake: Queue.Queue<void>
  readonly log: <A, E, R2>(self: Effect.Effect<A, E, R2>) => Effect.Effect<A, E, R2>
  /** Told after each settlement: the reactor's cursor may advance. */
  readonly onSettled: () => void
  /** Told when a performance ends (its slot is free). */
  readonly slotFreed: () => void
}

/**
 * A cancel keeps the row's lease until its performer stopped (EffectOutcomes.performanceMayBeRunning):
 * this is the performer's word, so an operator retry may start the effect again. A failed write
 * only delays that retry: until this owner stops, or is dead by the reclaim rule. The word is a
 * row update, not a command, so it rings its aggregate's readers itself: a thread's stream holds
 * the stopped step's close until it (ThreadStream in the server).
 */
const acknowledgeStopped = <R>(env: PerformEnv<R>, row: Outbox.OutboxRow, interruptedSince?: number) =>
  Clock.currentTimeMillis.pipe(
    Effect.flatMap((now) => CancelWatch.acknowledgeStopped(row, env.ownerId, interruptedSince, now)),
    Effect.retry({ times: 3 }),
    Effect.matchEffect({
      onFailure: (error) =>
        Effect.logWarning(
          "could not record that this performance stopped; a retry of it waits until this owner stops",
          { effectId: row.effectId, error: toStorageFailure("acknowledge stopped")(error) }
        ),
      onSuccess: () =>
        env.engine.ringAggregate(row.aggregateType, row.aggregateId).pipe(
          Effect.catchAll((error) =>
            // swallow-ok: only a hint is lost; other processes' readers close the step at the row's lease end
            Effect.logWarning("could not tell other processes that this performance stopped", {
              effectId: row.effectId,
              error
            })
          )
        )
    }),
    Effect.provide(env.context)
  )

/**
 * Hands a row this owner holds back to pending (a conditional update: it changes nothing unless the row
 * is still running at this attempt under this owner). A failed hand-back leaves the row to reconcile.
 */
const handBack = <R>(
  engine: EngineShape,
  ownerId: string,
  context: Context.Context<SqlClient | R>,
  row: Outbox.OutboxRow
) =>
  Clock.currentTimeMillis.pipe(
    Effect.flatMap((now) => Outbox.release(row.effectId, row.attempts, ownerId, now)),
    // Pending again: this process's reactors look again now, not at their poll (Engine.outboxWritten).
    Effect.zipRight(engine.outboxWritten([row.effectId])),
    Effect.catchAll((error) =>
      // swallow-ok: the row stays running under this owner's lease; boot reconcile (or a peer, once this
      // owner is dead) settles it by its kind's policy
      Effect.logError("could not hand a row back to pending; reconcile will", { effectId: row.effectId, error })
    ),
    Effect.provide(context)
  )

/** Performs one claimed row under its lease, then settles it through the front door. */
const perform = <R>(env: PerformEnv<R>, row: Outbox.OutboxRow, claimedSince: number) => {
  let slotHeld = true
  const freeSlot = () => {
    if (slotHeld) {
      slotHeld = false
      env.slotFreed()
    }
  }
  return Effect.gen(function* () {
    const faults = yield* FaultPoints
    const policy = env.definition.kinds[row.kind]!
    yield* faults.hit("reactor.after-claim", { kind: row.kind })
    // What a renewal's answer means. `true`: the lease is ours until now + lease. `false`: it was
    // lost (reclaimed, settled, or claimed again at another attempt): the handler is interrupted
    // and whoever holds the row now settles it. A failed renewal (the store refused it or could
    // not be reached) says neither: the lease is in doubt. The handler goes on (stopping it would
    // not undo what it may have done), the renewal is retried promptly, and this process never
    // reclaims the row itself (Outbox.reclaimable skips the judge's own rows). A peer may take
    // it only once this owner's heartbeat is stale by the peer's own watch of the store
    // (Worker.deadBefore). So an owner whose lease is in doubt asks the store again before it
    // settles: a row taken over meanwhile gets no outcome from it.
    const renewEvery = Math.max(1, Math.floor(env.leaseMs / 3))
    const renew = Clock.currentTimeMillis.pipe(
      Effect.flatMap((now) => Outbox.renew(row.effectId, row.attempts, env.ownerId, now + env.leaseMs, now)),
      Effect.mapError(toStorageFailure("renew lease")),
      Effect.either,
      Effect.provide(env.context)
    )
    let inDoubt = false
    // How the performance ended: the handler's exit, its lease lost (a cancel, a settlement elsewhere,
    // a renewal refused), or its timeout. One result that each of them sets, and the first wins. Racing
    // the three waits forked three fibers and a timer per performance (≈ 40 µs of CPU; a Deferred
    // instead of OneShot ≈ 12 µs more; docs/benchmarks.md).
    const ended = new OneShot<Ending>()
    const end = (ending: Ending) => Effect.sync(() => ended.complete(Exit.succeed(ending)))
    const startedAt = yield* Clock.currentTimeMillis
    const deadline = startedAt + Duration.toMillis(policy.timeout)
    // The handler's fiber is forked first, so the scheduler starts it ahead of the fibers the watch
    // and the renewal wake (the watch's first read of the row would otherwise run on the one
    // connection between the claim and the handler's start). Both are set up before this fiber
    // yields, so before the handler runs. In the performance's scope: an interrupted performance
    // (shutdown) stops its handler before it hands the row back.
    // A row whose payload cannot be read is not handed to its handler, which would act on something
    // other than what was asked; its verdict is a failure for good (verdictFor).
    const handle = row.undecodable === undefined ? env.definition.handle(row) : Effect.void
    const handler = yield* Effect.forkScoped(Effect.onExit(handle, end))
    // A cancel (or any settlement elsewhere) is seen at once, not at the next renewal.
    yield* env.cancels.watch(row.effectId, row.attempts, end("lease-lost"), claimedSince)
    // The lease's renewals, and the timeout: the same fiber sleeps until whichever is due first.
    yield* Effect.forkScoped(
      Effect.gen(function* () {
        let retryIn = 100
        let wait = renewEvery
        while (true) {
          const now = yield* Clock.currentTimeMillis
          if (now + wait >= deadline) {
            yield* Effect.sleep(Duration.millis(Math.max(0, deadline - now)))
            return yield* end("timed-out")
          }
          yield* Effect.sleep(Duration.millis(wait))
          const answer = yield* renew
          if (Either.isLeft(answer)) {
            if (!inDoubt) yield* Effect.logWarning("lease renewal failed; the lease is in doubt, retrying", answer.left)
            inDoubt = true
            wait = Math.min(retryIn, renewEvery)
            retryIn *= 2
            continue
          }
          inDoubt = false
          if (!answer.right) return yield* end("lease-lost")
          retryIn = 100
          wait = renewEvery
        }
      })
    )
    const ending = yield* ended.await
    // Nothing is left to stop (the first ending won): its own settlement's commit need not be read about.
    env.cancels.unwatch(row.effectId, row.attempts)
    // Lost or timed out: the handler is stopped (and waited for) before anything is recorded.
    if (typeof ending === "string") yield* Fiber.interrupt(handler)
    if (ending === "lease-lost") {
      // Say so, in case a cancel kept the lease.
      yield* acknowledgeStopped(env, row, startedAt)
      return yield* Effect.logWarning("the row was cancelled or lost while performing; its handler was stopped", {
        effectId: row.effectId
      })
    }
    const performed: Exit.Exit<unknown, EffectFailure | TimedOut> =
      ending === "timed-out" ? Exit.fail(new TimedOut()) : ending
    if (inDoubt) {
      // Re-check before settling. Lost: not this owner's outcome to record. Still refused:
      // settle anyway; the settle records the refusal, and its transaction re-checks the row.
      const answer = yield* renew
      if (Either.isRight(answer) && !answer.right) {
        return yield* Effect.logWarning(
          "lease lost while its renewal was in doubt; the outcome is not this owner's to record",
          {
            effectId: row.effectId,
            performed: Exit.isSuccess(performed) ? "succeeded" : "failed"
          }
        )
      }
    }
    yield* faults.hit("reactor.after-perform", { kind: row.kind })
    const now = yield* Clock.currentTimeMillis
    const settled = yield* settleOutcome(
      env.engine,
      row,
      verdictFor(performed, row, policy, env.retry, now),
      "reactor",
      outcomeId(row.effectId, row.attempts),
      processLossOf(policy.onProcessLoss, row.payload) === "process-bound"
    ).pipe(env.log)
    if (settled === "stale") yield* acknowledgeStopped(env, row)
    env.onSettled()
    // The handler is done and its outcome recorded: the slot is free now, not after this fiber's
    // last steps (the outcome's commit may already have made the next row claimable in a commit).
    // Not before that commit: its claim would then run in every settlement's transaction, on the
    // processor's serial path, to find nothing in most of them (measured on the PostgreSQL end-to-end
    // child: 191 more claims in commits for 190 fewer of the reactor's own, off that path).
    freeSlot()
    yield* faults.hit("reactor.after-settle", { kind: row.kind })
  }).pipe(
    Effect.scoped,
    Effect.onInterrupt(() =>
      // Shutdown ran out of grace: a replay-safe row goes back to pending now; a process-bound
      // one stays running for boot reconcile, which fails it with its stored reason.
      processLossOf(env.definition.kinds[row.kind]?.onProcessLoss, row.payload) === "replay-safe"
        ? handBack(env.engine, env.ownerId, env.context, row)
        : Effect.void
    ),
    Effect.ensuring(Effect.zipRight(Effect.sync(freeSlot), Queue.offer(env.wake, undefined))),
    Effect.annotateLogs({ effectId: row.effectId, kind: row.kind, attempt: row.attempts }),
    env.log
  )
}

/**
 * Runs one reactor in the current scope: parked until the engine is activated, then claiming and
 * performing until the scope closes, when it stops claiming, gives in-flight handlers the grace
 * period, hands replay-safe leftovers back to pending and leaves process-bound ones for reconcile.
 */
export const run = <R>(
  definition: ReactorDefinition<R>
): Effect.Effect<ReactorHandle, never, Engine | Worker | SqlClient | Scope.Scope | R> =>
  Effect.gen(function* () {
    const engine = yield* Engine
    const worker = yield* Worker
    const backend = yield* StoreBackend
    const context = yield* Effect.context<SqlClient | R>()
    const kinds = Object.keys(definition.kinds)
    const retry: RetryPolicy = { ...defaultRetry, ...definition.retry }
    const concurrency = Math.max(1, definition.concurrency ?? 1)
    const leaseMs = Duration.toMillis(definition.lease ?? "30 seconds")
    const pollMs = Duration.toMillis(definition.pollInterval ?? "1 second")
    const grace = definition.shutdownGrace ?? "10 seconds"
    const log = Effect.annotateLogs({ reactor: definition.name })

    const wake = yield* Queue.sliding<void>(1)
    // The loop's wait: the next ring of `wake`, or the time the step asked to look again.
    const alarm = yield* Alarm.make(wake)
    // Subscribed here, before the first claim: a change committed from now on rings the loop.
    const changes = yield* engine.outboxChanges
    yield* Effect.forkScoped(Stream.runForEachChunk(changes, () => Queue.offer(wake, undefined)))
    const running = yield* FiberMap.make<string>()
    const cancels = yield* CancelWatch.make({
      ownerId: worker.ownerId,
      changes: engine.outboxChanges,
      outboxChangeCount: Option.getOrUndefined(yield* TableChanges.watch(["outbox"])),
      touches: engine.outboxTouches,
      ...(definition.cancelPollInterval === undefined ? {} : { pollInterval: definition.cancelPollInterval })
    }).pipe(Effect.provide(context))
    let stopping = false
    let active = false
    let settledSinceCursor = false
    /**
     * The last commit whose claim at commit was a complete look for this reactor (CommitClaims.Claimer's
     * `covered`): while the engine's touches stay at `mark` and `due` has not come, a claim finds nothing.
     */
    let covered: { readonly mark: number; readonly due: number | undefined } | undefined
    /**
     * Slots taken: rows being performed plus slots reserved for a claim in flight (the loop's own, or
     * one inside a commit, CommitClaims.ts). Synchronous, so two claims never take more than `concurrency`.
     */
    let busy = 0
    const env: PerformEnv<R> = {
      definition,
      engine,
      ownerId: worker.ownerId,
      context,
      cancels,
      retry,
      leaseMs,
      wake,
      log,
      onSettled: () => {
        settledSinceCursor = true
      },
      slotFreed: () => {
        busy--
      }
    }

    /** Reserves every free slot (none before activation or once stopping); `unreserve` gives back what a claim did not fill. */
    const reserve = () => {
      if (!active || stopping) return 0
      const free = Math.max(0, concurrency - busy)
      busy += free
      return free
    }
    const unreserve = (slots: number) => {
      busy -= slots
    }
    /** Rows claimed at commit that never started: their slots and the rows go back. */
    const giveBack = (rows: ReadonlyArray<Outbox.OutboxRow>) =>
      Effect.suspend(() => {
        unreserve(rows.length)
        return Effect.forEach(rows, (row) => handBack(engine, worker.ownerId, context, row), { discard: true })
      }).pipe(log)
    /** Starts a claimed row's performance in a reserved slot (the slot is freed when it ends). */
    // Keyed by attempt: a commit may claim the next attempt of a row (a retry due at once) while the
    // previous attempt's fiber is still finishing its settlement; the same key would interrupt it.
    // `since`: the engine's touches mark taken before the claim's transaction (CancelWatch.watch).
    const start = (row: Outbox.OutboxRow, since: number) =>
      FiberMap.run(running, `${row.effectId}#${row.attempts}`, perform(env, row, since).pipe(Effect.provide(context)))

    // Rows claimed for this reactor inside the commits that make them claimable (CommitClaims.ts).
    // Only kinds that are always replay-safe. A row claimed in a commit has not started when that commit
    // lands, and a crash before its handler starts leaves it running under a dead owner: reconcile then
    // requeues a replay-safe row (it runs once after the restart, as an unclaimed one would), but would
    // fail a process-bound one as "may or may not have taken effect" although it never ran. Process-bound
    // rows keep the reactor's own claim, whose window before the handler starts is far shorter.
    const replaySafeKinds = kinds.filter((kind) => definition.kinds[kind]!.onProcessLoss === "replay-safe")
    if (replaySafeKinds.length > 0)
      yield* engine.claimAtCommit({
        ...(replaySafeKinds.length === kinds.length && {
          covered: (mark, due) => {
            covered = { mark, due }
          }
        }),
        name: definition.name,
        kinds: replaySafeKinds,
        owner: worker.ownerId,
        leaseMs,
        reserve,
        unreserve,
        giveBack,
        deliver: (rows, since) =>
          Effect.forEach(
            rows,
            (row) =>
              // Stopping, its performances map may be closing, and FiberMap.run on a closed map would
              // interrupt the caller: the engine's processor. Such a row never started, whatever its
              // kind, so it goes back to pending at once; so does one whose start failed.
              stopping
                ? giveBack([row])
                : Effect.flatMap(Effect.exit(start(row, since)), (exit) =>
                    exit._tag === "Success" ? Effect.void : giveBack([row])
                  ),
            { discard: true }
          ).pipe(Effect.uninterruptible)
      })

    // Where only this process writes the store, a poll first asks whether the outbox or the cursors
    // changed since its last look (storage/TableChanges.ts): an idle poll then reads nothing.
    const changeCount = Option.getOrUndefined(yield* TableChanges.watch(["outbox", "reactor_cursors"]))
    // The cursors alone: a step re-reads its cursor only when some cursor row changed since it last
    // read it (an operator retry or a requeue moving it back), not after every commit of the outbox.
    const cursorChanges = Option.getOrUndefined(yield* TableChanges.watch(["reactor_cursors"]))
    /** The cursor count when `cursor` was last read (undefined: read it at the next step). */
    let cursorReadAt: number | undefined
    /** The change count at which no running row of another owner existed, so none could be reclaimed. */
    let noOthersAt: number | undefined
    /** Whether a running row of another owner exists; rows of other owners never appear without a change. */
    const othersRunning = (changes: number) =>
      noOthersAt === changes
        ? Effect.succeed(false)
        : Effect.map(
            Outbox.reclaimable(Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, 1, kinds, worker.ownerId),
            (rows) => {
              if (rows.length === 0) noOthersAt = changes
              return rows.length > 0
            }
          )

    const reclaimDead = (now: number, changes: number | undefined) =>
      changes !== undefined && noOthersAt === changes
        ? Effect.succeed(0)
        : reclaimDeadOwners(engine, worker, definition.kinds, kinds, now)

    const loop = Effect.gen(function* () {
      yield* engine.awaitActivation
      active = true
      // Read by the first step (`cursorReadAt` is unset), inside its guard: a read here that failed
      // once (a busy store, a connection blip at activation) ended the loop for the process's life.
      let cursor = 0
      let coolOff = 100
      /** The end of the cool-off after a failed step: no step before it, whatever rings. */
      let coolUntil = -Infinity
      let lastReclaim = -Infinity
      let lastAdvance = -Infinity
      let lastHorizonLook = -Infinity
      /**
       * What the last full look found when it claimed nothing and reclaimed nothing: until the tables
       * change or `until` comes (the next pending row's due time), a look would find the same.
       */
      let quiet: { readonly changes: number; readonly until: number } | undefined
      while (!stopping) {
        const step = Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          // Taken before any read of this look: a change it does not see moves the count.
          const changes = changeCount?.()
          if (quiet !== undefined && quiet.changes === changes && now < quiet.until && !settledSinceCursor) {
            return Math.min(now + pollMs, quiet.until)
          }
          quiet = undefined
          if (now - lastReclaim >= pollMs) {
            lastReclaim = now
            yield* reclaimDead(now, changes)
          }
          const free = concurrency - busy
          // Every slot busy: nothing can be claimed (nor needs a due time) until a performance ends,
          // and each one rings `wake` as it ends. On the PostgreSQL end-to-end bench these steps were a
          // due-time read for one operation in fifteen. The cursor advance waits for that step too.
          if (free <= 0) return now + pollMs
          // At most once a poll: the advance is a durable write (an fsync holding SQLite's one
          // connection, 2.4 ms a call measured in the end-to-end run), and the claim finds pending rows
          // through its status index whatever the cursor, so a cursor that lags by a poll costs nothing.
          // The outbox's commit horizon (shared store): claims and the advance stay at or below it.
          // A real look at least once a poll, whatever the store knows of its own commits: the poll is what
          // finds a row whose ring was lost (StoreBackend.horizon may answer without a look otherwise).
          const lookNow = now - lastHorizonLook >= pollMs
          // The commit that rang this step (or the last one) claimed every row it could for this reactor
          // and nothing was recorded since: a claim would find nothing before `covered.due`. The poll
          // (lookNow) still claims: it is what finds a row no ring told of.
          const coveredNow =
            !lookNow &&
            covered !== undefined &&
            covered.mark === engine.outboxTouches.mark() &&
            (covered.due === undefined || covered.due > now)
          // Woken by the poll that is due (an interval after the last look, not after this skip: a skip at
          // every performance's end would otherwise put the poll off for as long as they keep coming).
          const wakeCovered = (due: number | undefined) =>
            due === undefined ? lastHorizonLook + pollMs : Math.min(lastHorizonLook + pollMs, due)
          const advanceDue = settledSinceCursor && now - lastAdvance >= pollMs
          if (coveredNow && !advanceDue) return wakeCovered(covered!.due)
          if (lookNow) lastHorizonLook = now
          // Before the horizon: a commit recorded after it may lie above the horizon the claim stays under.
          const lookedSince = engine.outboxTouches.mark()
          const horizon = yield* backend.horizon("outbox", lookNow ? Number.POSITIVE_INFINITY : undefined)
          /** The next due time after `now`, when read with the claim (see below). */
          let dueLater: { readonly due: number | undefined } | undefined
          if (advanceDue) {
            settledSinceCursor = false
            lastAdvance = now
            cursor = yield* ReactorCursors.advanceCursor(definition.name, kinds, now, horizon.trusted)
            cursorReadAt = undefined
            // Covered (and still, as of now): the advance was all this step had to do.
            if (coveredNow && covered!.mark === engine.outboxTouches.mark()) return wakeCovered(covered!.due)
          } else if (changes === undefined) {
            // Another writer (an operator retry, a peer's requeue) may have moved the cursor back, and
            // there is no change count to say so. The claim does not need the cursor: it finds pending
            // rows through its status index, and every pending row is above the cursor by definition,
            // so it claims from 0 (the same rows) and reads the next due time in its own round trip.
            // Without a change count there is no quiet look, which alone needs rows due by `now` too.
            cursor = 0
          } else {
            // Taken before the read: a change the read does not see moves the count.
            const cursorCount = cursorChanges?.()
            if (cursorCount === undefined || cursorCount !== cursorReadAt) {
              cursor = yield* ReactorCursors.cursor(definition.name)
              cursorReadAt = cursorCount
            }
          }
          let claimed: ReadonlyArray<Outbox.OutboxRow> = []
          let looked = false
          // Before the claim's statement: a cancel of a row it claims commits later (CancelWatch.watch).
          const claimedSince = engine.outboxTouches.mark()
          if (!stopping) {
            const space = yield* (yield* FreeSpace).check
            // A commit may have filled slots (CommitClaims.ts) while this step read.
            const slots = reserve()
            if (!space.belowFloor && slots > 0) {
              looked = true
              const request = {
                kinds,
                owner: worker.ownerId,
                now,
                leaseMs,
                limit: slots,
                after: cursor,
                upTo: horizon.trusted
              }
              // A failed or interrupted claim fills no slot.
              const given = Effect.onError(() => Effect.sync(() => unreserve(slots)))
              if (changes === undefined) {
                const read = yield* given(Outbox.claimWithNextDue(request))
                claimed = read.claimed
                dueLater = { due: read.due }
                // A claim that took every row it could, below a horizon with nothing waiting above it, is
                // a complete look as of `lookedSince` (every commit recorded by then had committed before
                // the horizon was taken): until the touches move, the steps that the ends of performances
                // ring need not claim again (without a change count, PostgreSQL has no `quiet` look).
                if (!horizon.waiting && !read.more) covered = { mark: lookedSince, due: read.due }
              } else claimed = yield* given(Outbox.claim(request))
            }
            unreserve(slots - claimed.length)
          }
          for (const row of claimed) yield* start(row, claimedSince)
          // Every free slot taken: nothing more can be claimed until a performance ends, and each one
          // rings `wake` as it ends. Looking again at once ran a step of reads on SQLite's one
          // connection between the claim's commit and the handlers' start (the pickup path).
          if (claimed.length > 0 && busy >= concurrency) return now + pollMs
          // Rows committed above the horizon wait for transactions that may end without a hint (a
          // rollback, another database's): a wake-up in real time (CommitHorizon.recheckSoon).
          if (horizon.waiting)
            yield* Effect.forkDaemon(Effect.zipRight(CommitHorizon.recheckSoon, Queue.offer(wake, undefined)))
          const due = dueLater === undefined ? yield* Outbox.nextDue(kinds, cursor) : dueLater.due
          // Quiet only when time alone changes nothing before `until`: no due row left unclaimed (it
          // waits behind its lane, and a later row may come due before the lane frees), and no row of
          // another owner that a lapse could make reclaimable.
          if (
            changes !== undefined &&
            looked &&
            claimed.length === 0 &&
            (due === undefined || due > now) &&
            !(yield* othersRunning(changes))
          )
            quiet = { changes, until: due ?? Number.POSITIVE_INFINITY }
          return due !== undefined && due > now ? Math.min(now + pollMs, due) : now + pollMs
        })
        // When to look again, as a time: the step's reads take time, and a wait computed from the clock
        // read at its start would wake that much later than the row is due.
        const wakeAt = yield* step.pipe(
          Effect.tap(() => Effect.sync(() => (coolOff = 100))),
          // A defect too (a bug in a read, a row no code expected): a loop that died would leave this
          // process claiming nothing, silently, while its heartbeat keeps peers from taking its work.
          // Only an interruption of the loop's own fiber (shutdown) ends it: Effect then runs no
          // recovery handler (see LoopRounds).
          Effect.catchAllCause((cause) =>
            Effect.gen(function* () {
              const failure = Cause.failureOption(cause)
              // The store is failing: back off instead of spinning on it.
              yield* Effect.logError("reactor step failed; cooling off", {
                coolOffMs: coolOff,
                error: Option.isSome(failure)
                  ? toStorageFailure("reactor")(failure.value)
                  : Cause.pretty(cause).slice(0, 2_000)
              })
              const wait = coolOff
              coolOff = Math.min(coolOff * 2, 10_000)
              coolUntil = (yield* Clock.currentTimeMillis) + wait
              return coolUntil
            })
          )
        )
        if (wakeAt > (yield* Clock.currentTimeMillis)) {
          yield* alarm.set(wakeAt)
          yield* Queue.take(wake)
        }
        // A floor, not a ceiling: on a busy node every commit rings, and a step failing on each try
        // (a bug in a read, a store that refuses) would otherwise run and log once per commit. The
        // rings are not lost: the step after the cool-off looks at everything.
        // Only after a failed step: a step that succeeded reads no clock for it.
        if (coolUntil !== -Infinity) {
          while (!stopping && (yield* Clock.currentTimeMillis) < coolUntil) {
            yield* alarm.set(coolUntil)
            yield* Queue.take(wake)
          }
          coolUntil = -Infinity
        }
      }
    }).pipe(Effect.provide(context), log)

    const loopFiber = yield* Effect.forkScoped(loop)

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        stopping = true
        yield* engine.stopAdmitting
        yield* loopFiber.interruptAsFork(loopFiber.id())
        // Give in-flight handlers their grace to finish and settle; interrupt the rest.
        // Finalizers run uninterruptibly; the wait itself must be interruptible for the grace to apply.
        yield* Effect.interruptible(FiberMap.awaitEmpty(running)).pipe(
          Effect.timeout(grace),
          Effect.catchAll(() => Effect.logWarning("shutdown grace ran out; interrupting in-flight effects")),
          Effect.catchAllCause((cause) =>
            Effect.logError("an in-flight effect ended with a defect at shutdown", Cause.pretty(cause))
          )
        )
        yield* FiberMap.clear(running)
      }).pipe(log)
    )

    return { name: definition.name, inFlight: FiberMap.size(running) }
  })

/** The reactor as a scoped layer: it runs for as long as the layer is alive. */
export const layer = <R>(definition: ReactorDefinition<R>) => Layer.scopedDiscard(run(definition))
