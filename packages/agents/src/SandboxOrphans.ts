/**
 * Sandboxes a dead server left behind. `--die-with-parent` ends bwrap with the server, but bubblewrap
 * has a window of its own: its child in the new PID namespace blocks on an eventfd until the outer
 * bwrap has set it up, and sets its parent-death signal only after that. A server killed inside that
 * window leaves that child orphaned (parent init) and blocked forever; its command never started.
 * `pnpm chaos` found one such process after a SIGKILL at a random instant. A booting server ends
 * every orphaned bwrap that binds a workspace of its own world, before any `execute` can run; a
 * live server's bwrap always has that server (or its own outer bwrap) as parent, so it is never one.
 * An orphan's new parent is init, or the nearest subreaper when there is one (systemd's user manager,
 * a container's init that is not pid 1 on the host, a supervisor with PR_SET_CHILD_SUBREAPER): the
 * inner bwrap, the one in the jail's own PID namespace, is an orphan whenever its parent is not a bwrap.
 */
import { Effect } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import * as nodePath from "node:path"

export interface ProcessEntry {
  readonly pid: number
  readonly ppid: number
  readonly argv: ReadonlyArray<string>
  /** Whether it lives in a PID namespace below this one (`NSpid` names more than one pid). */
  readonly nestedPidNamespace?: boolean
  /** Its parent's argv[0], when the parent could be read. */
  readonly parentProgram?: string
}

const isBwrap = (program: string | undefined) => nodePath.basename(program ?? "") === "bwrap"

/**
 * Pure: an orphaned bwrap bound to a workspace under `workspacesRoot`: its parent is init, or it is
 * the jail's inner bwrap and its parent (a subreaper) is no bwrap.
 */
export const isOrphanOf = (entry: ProcessEntry, workspacesRoot: string): boolean => {
  if (!isBwrap(entry.argv[0])) return false
  const orphaned = entry.ppid === 1 || (entry.nestedPidNamespace === true && !isBwrap(entry.parentProgram))
  if (!orphaned) return false
  const prefix = `${nodePath.resolve(workspacesRoot)}/`
  return entry.argv.some(
    (arg, i) =>
      arg === "--bind" && entry.argv[i + 1] !== undefined && nodePath.resolve(entry.argv[i + 1]!).startsWith(prefix)
  )
}

/** The live processes (zombies left out), read from /proc. */
const processTable = (): ReadonlyArray<ProcessEntry> => {
  const read: Array<{ pid: number; ppid: number; argv: ReadonlyArray<string>; nested: boolean }> = []
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      if (fields[0] === "Z") continue
      const argv = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0")
      const nsPids = /^NSpid:\s*(.*)$/m
        .exec(readFileSync(`/proc/${name}/status`, "utf8"))?.[1]
        ?.trim()
        .split(/\s+/)
      read.push({ pid: Number(name), ppid: Number(fields[1]), argv, nested: (nsPids?.length ?? 1) > 1 })
    } catch {
      // swallow-ok: the process ended while the table was read
    }
  }
  const programs = new Map(read.map((entry) => [entry.pid, entry.argv[0]]))
  return read.map(({ nested, ...entry }) => {
    const parentProgram = programs.get(entry.ppid)
    return { ...entry, nestedPidNamespace: nested, ...(parentProgram === undefined ? {} : { parentProgram }) }
  })
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
