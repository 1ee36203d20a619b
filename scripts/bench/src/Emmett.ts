/**
 * Peer: Emmett's SQLite event store with a `CommandHandler` appending the same one event per command
 * (Emmett has no receipts, outbox or read model in this shape, so it does less work per command).
 * Its store opens a connection per operation on the `sqlite3` driver (shared by concurrent operations); under concurrent clients it
 * can fail (SQLITE_BUSY and version conflicts): those are counted and reported, not retried away.
 * Emmett itself lives in peers/emmett, outside the workspace (its `sqlite3` driver builds a second
 * native SQLite); `pnpm bench` installs it first (peers/emmett/install.mjs).
 */
import { existsSync } from "node:fs"
import { join } from "node:path"
import { closedLoop, type RunResult } from "./Stats.js"

/** peers/emmett/peer.mjs, as this file uses it. */
interface EmmettPeer {
  readonly open: (fileName: string) => { readonly bump: (streamId: string, n: number) => Promise<void> }
}

// dist/src/Emmett.js → scripts/bench/peers/emmett.
const peerDir = new URL("../../peers/emmett/", import.meta.url)

const loadPeer = async (): Promise<EmmettPeer> => {
  if (!existsSync(new URL("node_modules/@event-driven-io/emmett-sqlite", peerDir))) {
    throw new Error(
      "the Emmett peer is not installed (it stays out of the default install); `pnpm bench` installs it, or run " +
        "`npx --yes pnpm@10 install --ignore-workspace --frozen-lockfile --dir scripts/bench/peers/emmett`"
    )
  }
  return (await import(new URL("peer.mjs", peerDir).href)) as EmmettPeer
}

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
  const store = (await loadPeer()).open(join(dir, "emmett.db"))
  const errors: Record<string, number> = {}
  let succeeded = 0
  // The store opens a connection per operation and closes it after; there is nothing to close here.
  // One stream per client, like our per-client aggregate; the first append also creates the schema.
  await store.bump("counter-warm", 0)
  const run = await closedLoop(clients, ops, async (i, c) => {
    try {
      await store.bump(`counter-${c}`, i)
      succeeded++
    } catch (error) {
      const key = errorKey(error)
      errors[key] = (errors[key] ?? 0) + 1
    }
  })
  // Throughput counts only commands that were stored.
  return { ...run, ops: succeeded, errors, succeeded }
}
