/**
 * Peer: Emmett's SQLite event store with a `CommandHandler` appending the same one event per command
 * (Emmett has no receipts, outbox or read model in this shape, so it does less work per command).
 * Its store opens a connection per operation on the `sqlite3` driver (shared by concurrent operations); under concurrent clients it
 * can fail (SQLITE_BUSY and version conflicts): those are counted and reported, not retried away.
 */
import { CommandHandler } from "@event-driven-io/emmett"
import { getSQLiteEventStore } from "@event-driven-io/emmett-sqlite"
import { join } from "node:path"
import { closedLoop, type RunResult } from "./Stats.js"

type Bumped = { type: "CounterBumped"; data: { n: number } }

const handle = CommandHandler<{ bumps: number }, Bumped>({
  evolve: (state) => ({ bumps: state.bumps + 1 }),
  initialState: () => ({ bumps: 0 })
})

export interface EmmettResult extends RunResult {
  /** Operations that failed, by error code or name. */
  readonly errors: Readonly<Record<string, number>>
  readonly succeeded: number
}

const errorKey = (error: unknown) => {
  const e = error as { code?: unknown; name?: unknown; message?: unknown }
  if (typeof e.code === "string") return e.code
  if (typeof e.name === "string" && e.name !== "Error") return e.name
  return String(e.message ?? error).slice(0, 60)
}

export const runEmmett = async (dir: string, clients: number, ops: number): Promise<EmmettResult> => {
  const store = getSQLiteEventStore({ fileName: join(dir, "emmett.db"), schema: { autoMigration: "CreateOrUpdate" } })
  const errors: Record<string, number> = {}
  let succeeded = 0
  // The store opens a connection per operation and closes it after; there is nothing to close here.
  // One stream per client, like our per-client aggregate; the first append also creates the schema.
  await handle(store, "counter-warm", () => ({ type: "CounterBumped", data: { n: 0 } }))
  const run = await closedLoop(clients, ops, async (i, c) => {
    try {
      await handle(store, `counter-${c}`, () => ({ type: "CounterBumped", data: { n: i } }))
      succeeded++
    } catch (error) {
      const key = errorKey(error)
      errors[key] = (errors[key] ?? 0) + 1
    }
  })
  // Throughput counts only commands that were stored.
  return { ...run, ops: succeeded, errors, succeeded }
}
