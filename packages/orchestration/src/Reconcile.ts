/**
 * Retire a dead owner's effects before new work. At boot, every outbox row left `running` by an
 * owner that is gone is settled by its kind's policy, through the front door so the owning aggregate
 * and its read model show it: replay-safe rows go back to pending, process-bound rows fail with a
 * stored reason. It runs before any reactor claims and before any client command is admitted.
 * A row whose own aggregate cannot record its settlement (Quarantine.classify) is parked instead,
 * so one broken aggregate never stops the node from booting; a failure of the store still does.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Exit } from "effect"
import { reconcileId } from "./EffectOutcomes.js"
import { Engine } from "./Engine.js"
import type { DispatchError, StorageFailure } from "./Errors.js"
import { FaultPoints } from "./FaultPoints.js"
import * as Outbox from "./Outbox.js"
import * as Quarantine from "./Quarantine.js"
import { type KindPolicy, processLossOf } from "./ReactorSettlement.js"
import { toStorageFailure } from "./storage/StorageErrors.js"

/**
 * Running rows read and settled per page: one boot batch (Engine.ts), so one COMMIT per page. Fewer,
 * larger commits write fewer WAL pages per row (index pages shared by the page's rows).
 */
const PAGE = 2_000

export const requeueReason = "requeued after the previous server process ended"
export const processEndedReason = "server process ended before the effect completed"

export interface ReconcileReport {
  readonly requeued: number
  readonly failed: number
  /** Settlements that found the row already settled (a reconcile cut off and run again). */
  readonly alreadySettled: number
  /** Rows parked because their aggregate could not record the settlement (see Quarantine.ts). */
  readonly quarantined: number
}

export interface ReconcileOptions {
  /** Policy per effect kind. A kind nobody declared is treated as process-bound: never repeated. */
  readonly policies: ReadonlyMap<string, KindPolicy["onProcessLoss"]>
  /** Owners that are alive and keep their rows (other processes on a shared store). */
  readonly liveOwners?: ReadonlyArray<string>
  /**
   * Shared store: settle only the rows of this node's earlier incarnations. Rows of other nodes are
   * left to their owners, or to the reactors' dead-owner reclaim once lease and heartbeat expired.
   */
  readonly earlierIncarnationsOf?: { readonly nodeId: string; readonly currentOwner: string }
  /** Reports progress every this many rows. Default 1,000. */
  readonly progressEvery?: number
}

export const reconcileAfterProcessLoss = (
  options: ReconcileOptions
): Effect.Effect<ReconcileReport, StorageFailure | DispatchError, Engine | SqlClient> =>
  Effect.gen(function* () {
    const engine = yield* Engine
    const faults = yield* FaultPoints
    // Before activation (boot), a page goes in boot batches; afterwards its settlements are queued
    // together, so the processor's group commit settles them a batch at a time (SettlementPage.ts).
    const dispatchAll = (commands: ReadonlyArray<unknown>) =>
      Effect.flatMap(engine.isActive, (active) =>
        active
          ? Effect.forEach(
              commands,
              (command) => Effect.exit(engine.dispatchWithReceipt(command, { origin: "internal" })),
              {
                concurrency: 64
              }
            )
          : engine.dispatchManyDuringBoot(commands)
      )
    const report = { requeued: 0, failed: 0, alreadySettled: 0, quarantined: 0 }
    const progressEvery = options.progressEvery ?? 1_000
    const skipped = new Set<string>()
    while (true) {
      const own = options.earlierIncarnationsOf
      const running =
        own === undefined
          ? Outbox.runningNotOwnedBy(options.liveOwners ?? [], PAGE)
          : Outbox.runningOfEarlierIncarnations(own.nodeId, own.currentOwner, PAGE)
      const rows = (yield* running.pipe(Effect.mapError(toStorageFailure("reconcile: read running rows")))).filter(
        (row) => !skipped.has(row.effectId)
      )
      if (rows.length === 0) break
      const planned = rows.map((row) => {
        const policy = processLossOf(options.policies.get(row.kind), row.payload)
        const base = {
          commandId: reconcileId(row.effectId, row.attempts),
          effectId: row.effectId,
          attempt: row.attempts,
          aggregateType: row.aggregateType,
          aggregateId: row.aggregateId,
          by: "reconcile"
        }
        const command =
          policy === "replay-safe"
            ? { ...base, type: "effect.requeue", reason: requeueReason }
            : {
                ...base,
                type: "effect.fail",
                error: { message: processEndedReason, code: "process-ended", reason: "process-lost" }
              }
        return { row, policy, command }
      })
      const answers = yield* dispatchAll(planned.map((p) => p.command))
      for (const [index, { row, policy, command }] of planned.entries()) {
        const answer = answers[index]!
        const failure = Exit.isFailure(answer)
          ? yield* Quarantine.afterFailedSettle(row, command, answer.cause, "reconcile")
          : undefined
        // A failure of the store or the engine is not this row's problem: boot stops, loudly.
        if (failure?._tag === "Fatal" && Exit.isFailure(answer)) return yield* Effect.failCause(answer.cause)
        if (failure?._tag === "Quarantine") {
          // Parked, so no longer running; skipped too in case the row changed under the park.
          skipped.add(row.effectId)
          report.quarantined++
        } else if (failure?._tag === "Stale" || (Exit.isSuccess(answer) && answer.value.duplicate)) {
          // Stale: settled by an earlier, cut-off run of this reconcile. Never loop on that row.
          skipped.add(row.effectId)
          report.alreadySettled++
        } else if (policy === "replay-safe") report.requeued++
        else report.failed++
        yield* faults.hit("reconcile.mid", { kind: row.kind })
        const done = report.requeued + report.failed + report.alreadySettled + report.quarantined
        if (done % progressEvery === 0) yield* Effect.logInfo(`reconcile: ${done} rows settled so far`)
      }
    }
    yield* Effect.logInfo("reconcile after process loss finished", report)
    return report
  }).pipe(Effect.withSpan("reconcileAfterProcessLoss"))
