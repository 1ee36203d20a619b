/**
 * Named points on the write path where a test can make the store refuse a write, the way a full
 * disk or a failing device would. Production uses the default, which never fails.
 */
import { SqlError } from "@effect/sql/SqlError"
import { Context, Effect } from "effect"

export type WritePoint = "events" | "projections" | "outbox" | "receipts"

export interface StorageFaultsShape {
  readonly before: (point: WritePoint, commandId: string) => Effect.Effect<void, SqlError>
}

export class StorageFaults extends Context.Reference<StorageFaults>()("orchestration/StorageFaults", {
  defaultValue: (): StorageFaultsShape => ({ before: () => Effect.void })
}) {}

/** A driver-shaped error, as better-sqlite3 would raise it. */
export const driverError = (code: string, message: string): SqlError => {
  const cause = Object.assign(new Error(message), { code })
  return new SqlError({ cause, message: "Failed to execute statement" })
}
