/**
 * Refused writes, through the engine's own fault-injection point (StorageFaults): while faults are on,
 * each write point refuses with a seeded probability and a driver code a full or failing disk gives.
 */
import { driverError, StorageFaults, type WritePoint } from "@orchestration/engine"
import { Effect, Layer } from "effect"
import type { Rng } from "./Rng.js"
import type { Trace } from "./Trace.js"

export const faultCodes = ["SQLITE_FULL", "SQLITE_IOERR_WRITE", "SQLITE_IOERR_FSYNC", "SQLITE_BUSY"] as const

export interface FaultLog {
  /** Command ids a refused write hit, with how many times. */
  readonly hits: Map<string, number>
  count: number
}

export const layer = (rng: Rng, trace: Trace, rate: () => number, log: FaultLog) =>
  Layer.succeed(StorageFaults, {
    before: (point: WritePoint, commandId: string) =>
      Effect.suspend(() => {
        const p = rate()
        if (p === 0 || !rng.chance(p)) return Effect.void
        const code = rng.pick(faultCodes)
        log.count++
        log.hits.set(commandId, (log.hits.get(commandId) ?? 0) + 1)
        trace.add("fault", `${point} ${commandId} ${code}`)
        return Effect.fail(driverError(code, `${code}: injected by the simulation at ${point}`))
      })
  })
