/**
 * Sandboxes a dead server left behind. `--die-with-parent` ends bwrap with the server, but bubblewrap
 * has a window of its own: its child in the new PID namespace blocks on an eventfd until the outer
 * bwrap has set it up, and sets its parent-death signal only after that. A server killed inside that
 * window leaves that child orphaned (parent init) and blocked forever; its command never started.
 * `pnpm chaos` found one such process after a SIGKILL at a random instant. A booting server ends
 * every orphaned bwrap that binds a workspace of its own world, before any `execute` can run; a
 * live server's bwrap always has that server (or its own outer bwrap) as parent, so it is never one.
 */
import { Effect } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import * as nodePath from "node:path"

export interface ProcessEntry {
  readonly pid: number
  readonly ppid: number
  readonly argv: ReadonlyArray<string>
}

/** Pure: an orphaned bwrap (parent init) bound to a workspace under `workspacesRoot`. */
export const isOrphanOf = (entry: ProcessEntry, workspacesRoot: string): boolean => {
  if (entry.ppid !== 1 || nodePath.basename(entry.argv[0] ?? "") !== "bwrap") return false
  const prefix = `${nodePath.resolve(workspacesRoot)}/`
  return entry.argv.some(
    (arg, i) =>
      arg === "--bind" && entry.argv[i + 1] !== undefined && nodePath.resolve(entry.argv[i + 1]!).startsWith(prefix)
  )
}

/** The live processes (zombies left out), read from /proc. */
const processTable = (): ReadonlyArray<ProcessEntry> => {
  const entries: Array<ProcessEntry> = []
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      if (fields[0] === "Z") continue
      const argv = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0")
      entries.push({ pid: Number(name), ppid: Number(fields[1]), argv })
    } catch {
      // swallow-ok: the process ended while the table was read
    }
  }
  return entries
}

/** Ends (SIGKILL) the orphaned sandboxes of this world; answers their pids. */
export const sweep = (workspacesRoot: string): Effect.Effect<ReadonlyArray<number>> =>
  Effect.sync(() => {
    const killed: Array<number> = []
    for (const entry of processTable()) {
      if (!isOrphanOf(entry, workspacesRoot)) continue
      try {
        process.kill(entry.pid, "SIGKILL")
        killed.push(entry.pid)
      } catch {
        // swallow-ok: it ended on its own between the read and the kill
      }
    }
    return killed
  }).pipe(
    Effect.tap((killed) =>
      killed.length === 0
        ? Effect.void
        : Effect.logWarning("ended sandboxes a dead server left behind", { pids: killed.join(" ") })
    )
  )
