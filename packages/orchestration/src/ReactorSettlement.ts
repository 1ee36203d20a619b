/**
 * How a reactor settles rows through the front door: the outcome of its own performance, retried
 * until the store takes it (a refused write becomes the outcome; an outcome the engine cannot take
 * becomes a failure saying so; an aggregate that cannot record it gets the row parked, as does a
 * row whose failure the engine cannot take either), and the rows of dead owners, settled by their
 * kind's policy. The processor
 * settles what these dispatch a batch at a time (SettlementPage.ts).
 */
import { Cause, Duration, Effect, Exit, Option, Schedule, Schema } from "effect"
import { type EffectError, performedNotRecorded, reclaimId, type SettledBy } from "./EffectOutcomes.js"
import type { EngineShape } from "./Engine.js"
import { CommandIdConflict, CommandRejected, type DispatchError, EngineUnavailable, StorageFailure } from "./Errors.js"
import * as Outbox from "./Outbox.js"
import * as Quarantine from "./Quarantine.js"
import type { WorkerShape } from "./Worker.js"

/**
 * What may happen to a row whose owner died while performing it: named once here, for kind tables,
 * payloads that record a per-call policy, and ledgers alike.
 */
export const ProcessLossPolicy = Schema.Literal("replay-safe", "process-bound")
export type ProcessLossPolicy = typeof ProcessLossPolicy.Type

export interface KindPolicy {
  /**
   * replay-safe: performed again; process-bound: failed with a stored reason, never repeated. A
   * function decides per row from the payload recorded with the intent (e.g. an MCP tool's
   * annotations), so what happens to a recorded row never changes after it was planned.
   */
  readonly onProcessLoss: ProcessLossPolicy | ((payload: unknown) => ProcessLossPolicy)
  /** A handler running longer is interrupted and its row settled by the policy. */
  readonly timeout: Duration.DurationInput
}

/**
 * The policy of one row; a kind nobody declared is process-bound: never repeated. So is a row whose
 * function policy throws or answers off the list: a policy reading a field of an undecodable row's
 * `null` payload would otherwise throw inside dead-owner reclaim (every step of the reactor failing)
 * or boot reconcile, and not repeating is the answer that can never perform an effect twice.
 */
export const processLossOf = (
  onProcessLoss: KindPolicy["onProcessLoss"] | undefined,
  payload: unknown
): ProcessLossPolicy => {
  if (typeof onProcessLoss !== "function") return onProcessLoss ?? "process-bound"
  try {
    return onProcessLoss(payload) === "replay-safe" ? "replay-safe" : "process-bound"
  } catch {
    // swallow-ok: a throwing policy means "cannot tell", whose safe answer is process-bound (above)
    return "process-bound"
  }
}

/** The settlement a reactor dispatches after a performance ended, or `release` to hand it back. */
export type Verdict =
  | { readonly type: "effect.succeed"; readonly response: unknown }
  | { readonly type: "effect.fail"; readonly error: EffectError; readonly retryAt?: number }

const dispatch = (engine: EngineShape, command: Record<string, unknown>) =>
  engine.dispatchWithReceipt(command, { origin: "internal" })

/** Why a dispatch failed, in a line: the error's message, or the defect's (never a stack). */
const whyOf = (cause: Cause.Cause<DispatchError>): string => {
  const failure = Option.getOrUndefined(Cause.failureOption(cause))
  if (failure !== undefined) return failure.message
  const defect = Option.getOrUndefined(Cause.dieOption(cause))
  return defect instanceof Error ? `${defect.name}: ${defect.message}` : String(defect ?? Cause.pretty(cause))
}

/**
 * Parks the row, trying again until the store takes the park: a live owner's running row is
 * reclaimed by nobody (only boot reconcile after this process ends), as a refused settle is retried.
 */
const parkUntilStored = (
  row: Outbox.OutboxRow,
  settlement: Record<string, unknown>,
  failure: { readonly reason: Quarantine.QuarantineReason; readonly message: string },
  by: SettledBy
) =>
  Quarantine.park(row, settlement, failure, by).pipe(
    Effect.tapError((stored) =>
      Effect.logError("could not quarantine the effect; trying again", { effectId: row.effectId, stored })
    ),
    Effect.retry(Schedule.union(Schedule.exponential("100 millis"), Schedule.spaced("5 seconds"))),
    Effect.as("quarantined" as const)
  )

/**
 * Dispatches a settlement until the store takes it. A refused write turns into the outcome
 * (`storage: <code>`) under the same id, so the aggregate ends visibly failed, never stuck.
 */
export const settleOutcome = (
  engine: EngineShape,
  row: Outbox.OutboxRow,
  verdict: Verdict,
  by: SettledBy,
  commandId: string,
  /** The row's kind is process-bound: a success whose outcome cannot be recorded is recorded as performed. */
  processBound: boolean
) =>
  Effect.gen(function* () {
    const base = {
      commandId,
      effectId: row.effectId,
      attempt: row.attempts,
      aggregateType: row.aggregateType,
      aggregateId: row.aggregateId,
      by
    }
    const performed: Record<string, unknown> = { ...base, ...verdict }
    // A process-bound effect that succeeded took effect: if its outcome cannot be recorded, the failure
    // recorded instead says so, and an operator retry is refused. A failure (retryable or not, or never
    // performed) is recorded as before and may be retried, as a recorded failure may.
    const tookEffect = processBound && verdict.type === "effect.succeed"
    let command = performed
    let pause = 100
    while (true) {
      const exit = yield* Effect.exit(dispatch(engine, command))
      if (Exit.isSuccess(exit)) return "settled" as const
      const error = Option.getOrUndefined(Cause.failureOption(exit.cause))
      if (error instanceof CommandRejected) {
        yield* Effect.logInfo("settle was stale: the lease was lost before it landed", {
          effectId: row.effectId,
          reason: error.message
        })
        return "stale" as const
      }
      // A conflict means an earlier try under this id committed after all (an ambiguous commit).
      if (error instanceof CommandIdConflict) return "settled" as const
      if (error instanceof EngineUnavailable && error.reason === "shutting-down") {
        yield* Effect.logWarning("engine closed before the settle landed; boot reconcile will settle it", {
          effectId: row.effectId
        })
        return "abandoned" as const
      }
      if (error instanceof StorageFailure) {
        yield* Effect.logError("the store refused this effect's outcome; recording the refusal as the outcome", {
          effectId: row.effectId,
          attempt: row.attempts,
          performed: verdict,
          storage: error.code
        })
        const refused: EffectError = tookEffect
          ? {
              message: `storage: ${error.code}; the effect was performed (succeeded), but the store refused its outcome`,
              code: performedNotRecorded,
              reason: "storage"
            }
          : { message: `storage: ${error.code}`, code: error.code, reason: "storage" }
        command = { ...base, type: "effect.fail", error: refused }
      } else if (!(error instanceof EngineUnavailable)) {
        const failure = Quarantine.classify(
          engine.aggregate(row.aggregateType) !== undefined,
          row.aggregateType,
          exit.cause
        )
        if (failure._tag === "Stale") return "stale" as const
        // The fallback below (this row's "could not be recorded" failure) was the command that failed.
        const fallbackTried = command !== performed && (command.error as EffectError).reason === "defect"
        if (failure._tag === "Quarantine" && (failure.reason !== "command-defect" || fallbackTried)) {
          // The aggregate cannot record anything about this row: park it with what was performed,
          // for an operator to release or fail. Never left running, never retried in silence.
          return yield* parkUntilStored(row, performed, failure, by)
        }
        if (fallbackTried) {
          // Not even the failure could be taken (Fatal: the engine refused our own command or died
          // on it). Left running, the row would hold its lane under its live owner until a restart.
          // Parked with the failure as its settlement, which a release dispatches once fixed.
          return yield* parkUntilStored(
            row,
            command,
            { reason: "settlement-defect", message: `the engine could not take its settlement: ${whyOf(exit.cause)}` },
            by
          )
        }
        // The outcome could not be recorded (the aggregate's code threw, or the engine could not
        // take the settlement itself: a response with no JSON form): record that instead, once.
        yield* Effect.logError("could not record the outcome; recording that it could not be recorded", {
          effectId: row.effectId,
          cause: Cause.pretty(exit.cause)
        })
        command = {
          ...base,
          type: "effect.fail",
          error: {
            message: `outcome could not be recorded: ${whyOf(exit.cause)}`,
            code: tookEffect ? performedNotRecorded : "outcome-not-recorded",
            reason: "defect"
          }
        }
        continue
      }
      yield* Effect.sleep(Duration.millis(pause))
      pause = Math.min(pause * 2, 5_000)
    }
  })

/**
 * Rows of dead owners (lease expired, heartbeat stopped) are settled by policy while running:
 * never this process's own, and only once it has watched the store long enough to call anyone dead.
 */
export const reclaimDeadOwners = (
  engine: EngineShape,
  worker: WorkerShape,
  policies: { readonly [kind: string]: KindPolicy },
  kinds: ReadonlyArray<string>,
  now: number
) =>
  Effect.gen(function* () {
    const deadBefore = yield* worker.deadBefore(now)
    if (deadBefore === undefined) return 0
    const dead = yield* Outbox.reclaimable(now, deadBefore, 100, kinds, worker.ownerId)
    for (const row of dead) {
      const replaySafe = processLossOf(policies[row.kind]?.onProcessLoss, row.payload) === "replay-safe"
      const command = {
        type: replaySafe ? "effect.requeue" : "effect.fail",
        commandId: reclaimId(row.effectId, row.attempts),
        effectId: row.effectId,
        attempt: row.attempts,
        aggregateType: row.aggregateType,
        aggregateId: row.aggregateId,
        by: "reclaim",
        ...(replaySafe
          ? { reason: "requeued: its owner stopped before the effect completed" }
          : {
              error: {
                message: "owner stopped before the effect completed",
                code: "owner-lost",
                reason: "process-lost"
              }
            })
      }
      const exit = yield* Effect.exit(dispatch(engine, command))
      if (Exit.isSuccess(exit)) {
        yield* Effect.logWarning("reclaimed a dead owner's effect", {
          effectId: row.effectId,
          owner: row.leaseOwner,
          replaySafe
        })
      } else if ((yield* Quarantine.afterFailedSettle(row, command, exit.cause, "reclaim"))._tag === "Fatal") {
        yield* Effect.logWarning("could not reclaim a dead owner's effect; trying again at the next poll", {
          effectId: row.effectId,
          cause: Cause.pretty(exit.cause)
        })
      }
    }
    return dead.length
  })
