/**
 * The process table, read from /proc, as an outside observer counts a server's sandbox processes:
 * its live descendants (bwrap, the jailed shell, its commands) and any process whose arguments carry
 * a run's marker (the jailed shell and bwrap hold the command line, so they carry the job's token).
 */
import { readdirSync, readFileSync } from "node:fs"

interface Entry {
  readonly ppid: number
  readonly argv: ReadonlyArray<string>
}

/** pid → parent and argv, zombies left out (a zombie has ended; only its parent has not reaped it). */
export const processTable = (): Map<number, Entry> => {
  const table = new Map<number, Entry>()
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      if (fields[0] === "Z") continue
      table.set(Number(pid), {
        ppid: Number(fields[1]),
        argv: readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
      })
    } catch {
      // swallow-ok: the process ended while the table was read
    }
  }
  return table
}

/** Live descendants of `root`. */
export const descendantsOf = (root: number): Array<number> => {
  const table = processTable()
  const under = (pid: number): boolean => {
    for (let p = table.get(pid)?.ppid; p !== undefined && p > 1; p = table.get(p)?.ppid) if (p === root) return true
    return false
  }
  return [...table.keys()].filter(under)
}

/** Live processes with an argument that contains `marker`. */
export const carrying = (marker: string): Array<number> =>
  [...processTable()].filter(([, entry]) => entry.argv.some((arg) => arg.includes(marker))).map(([pid]) => pid)

export const alive = (pids: ReadonlyArray<number>): Array<number> => {
  const table = processTable()
  return pids.filter((pid) => table.has(pid))
}

/** Live processes whose argv is exactly these arguments (say, a command's own `sleep`). */
export const running = (...argv: ReadonlyArray<string>): Array<number> =>
  [...processTable()]
    .filter(([, entry]) => {
      const args = entry.argv.filter((arg) => arg !== "")
      return args.length === argv.length && args.every((arg, i) => arg === argv[i])
    })
    .map(([pid]) => pid)

/**
 * Of `pids`, the ones that are bubblewrap's setup-window orphans: a `bwrap` whose parent is init and
 * that has no live child, so the command it was to run never started. SandboxOrphans.ts ends these at
 * the next boot; anything else still alive after its server's kill is a command that outlived it.
 */
export const unstartedOrphans = (pids: ReadonlyArray<number>): Array<number> => {
  const table = processTable()
  const parents = new Set([...table.values()].map((entry) => entry.ppid))
  return pids.filter((pid) => {
    const entry = table.get(pid)
    return (
      entry !== undefined &&
      entry.ppid === 1 &&
      (entry.argv[0] ?? "").split("/").at(-1) === "bwrap" &&
      !parents.has(pid)
    )
  })
}
