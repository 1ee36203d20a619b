export * as Aggregate from "./Aggregate.js"
export * as Audit from "./Audit.js"
export * as AuditFindings from "./AuditFindings.js"
export {
  Decision,
  type DecideContext,
  type EffectIntent,
  type EventRecord,
  type AggregateDefinition
} from "./Aggregate.js"
export * as CanonicalJson from "./CanonicalJson.js"
export * as CommandId from "./CommandId.js"
export * as Engine from "./Engine.js"
export type { DispatchAnswer, EngineConfig, EngineShape } from "./Engine.js"
export * from "./Errors.js"
export * as EventLog from "./EventLog.js"
export * as Outbox from "./Outbox.js"
export * as Owners from "./Owners.js"
export * as ReactorCursors from "./ReactorCursors.js"
export * as Projection from "./Projection.js"
export * as Receipts from "./Receipts.js"
export * as SqliteClient from "./storage/SqliteClient.js"
export * as SqliteStore from "./storage/SqliteStore.js"
export * as StorageErrors from "./storage/StorageErrors.js"
export {
  StorageFaults,
  driverError,
  layerFromSpec as storageFaultsFromSpec,
  type WritePoint
} from "./storage/StorageFaults.js"
export { writeTransaction } from "./storage/Transactions.js"
export * as WriteProbe from "./storage/WriteProbe.js"
export * as Boot from "./Boot.js"
export * as EffectOutcomes from "./EffectOutcomes.js"
export type { EffectError, EffectOutcome, FailureReason } from "./EffectOutcomes.js"
export * as FaultPoints from "./FaultPoints.js"
export * as FreeSpace from "./FreeSpace.js"
export { FlushWindows } from "./FlushWindows.js"
export { StreamTails } from "./StreamTails.js"
export * as Ingestion from "./Ingestion.js"
export * as LoopRounds from "./LoopRounds.js"
export * as StoredJson from "./StoredJson.js"
export * as Reactor from "./Reactor.js"
export { EffectFailure } from "./Reactor.js"
export * as Quarantine from "./Quarantine.js"
export { EffectNotQuarantined, EffectStillQuarantined } from "./Quarantine.js"
export * as Reconcile from "./Reconcile.js"
export { reconcileAfterProcessLoss } from "./Reconcile.js"
export * as Retention from "./Retention.js"
export * as Worker from "./Worker.js"
export * as PostgresStore from "./storage/PostgresStore.js"
export { StoreBackend } from "./storage/StoreBackend.js"
export * as Timers from "./Timers.js"
export * as StreamChunks from "./StreamChunks.js"
export * as StreamIngest from "./StreamIngest.js"
export { StreamNotRecorded } from "./StreamIngest.js"
export * as TimerLoop from "./TimerLoop.js"
export * as Waits from "./Waits.js"
