/**
 * Named points on the write path where a test can make the store refuse a write, the way a full
 * disk or a failing device would. Production provides none.
 */
import { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer } from "effect"

export type WritePoint = "events" | "projections" | "outbox" | "receipts"

export interface StorageFaultsShape {
  readonly before: (point: WritePoint, commandId: string) => Effect.Effect<void, SqlError>
}

/**
 * Optional: when no layer provides it, no fault is injected and the write path runs no check at all
 * (read it with `Effect.serviceOption`).
 */
export class StorageFaults extends Context.Tag("orchestration/StorageFaults")<StorageFaults, StorageFaultsShape>() {}

/** A driver-shaped error, as better-sqlite3 would raise it. */
export const driverError = (code: string, message: string): SqlError => {
  const cause = Object.assign(new Error(message), { code })
  return new SqlError({ cause, message: "Failed to execute statement" })
}

/**
 * A fault layer from configuration, for the chaos harness's I/O-error mode:
 * `STORAGE_FAULTS=events:nth=3:code=SQLITE_IOERR_WRITE` refuses the 3rd write at that point with that
 * driver code (`every=N` refuses every Nth). Environment only, like FAULT_POINTS; never by request.
 */
export const layerFromSpec = (spec: string) => {
  const rules = spec
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((entry) => {
      const [point, ...filters] = entry.split(":")
      if (!["events", "projections", "outbox", "receipts"].includes(point!)) {
        throw new Error(`STORAGE_FAULTS: unknown write point '${point}' (events, projections, outbox, receipts)`)
      }
      const options = new Map(filters.map((f) => f.split("=") as [string, string]))
      const number = (key: string) => (options.has(key) ? Number(options.get(key)) : undefined)
      return {
        point: point as WritePoint,
        nth: number("nth"),
        every: number("every"),
        code: options.get("code") ?? "SQLITE_IOERR",
        hits: 0
      }
    })
  return Layer.succeed(StorageFaults, {
    before: (point) =>
      Effect.suspend(() => {
        for (const rule of rules) {
          if (rule.point !== point) continue
          rule.hits++
          const fires =
            (rule.nth !== undefined && rule.hits === rule.nth) ||
            (rule.every !== undefined && rule.hits % rule.every === 0)
          if (fires)
            return Effect.fail(
              driverError(rule.code, `${rule.code}: injected by STORAGE_FAULTS at ${point} (write ${rule.hits})`)
            )
        }
        return Effect.void
      })
  })
}
