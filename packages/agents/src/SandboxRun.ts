/**
 * One sandbox run as a process: output tails, the wall clock, the output cap, stopping (SIGTERM to
 * the jail's process group, SIGKILL after a grace) and which limit, if any, ended the command.
 * Separate from Sandbox.ts so the jail's arguments and the process handling each read as one thing.
 */
import type { ChildProcess } from "node:child_process"
import { constants as osConstants } from "node:os"
import type { SandboxConfig, SandboxLimit, SandboxResult } from "./Sandbox.js"

/**
 * The descriptor the jail's first process writes its start mark to. bwrap reports its own setup
 * failures as "bwrap: …" and status 1, which any command can print too (a nested bwrap does): only a
 * run without the mark is one whose command never started.
 */
export const STARTED_FD = 4

/** Keeps the last `max` bytes written to it and counts all of them. */
export class Tail {
  private chunks: Array<Buffer> = []
  private kept = 0
  total = 0
  constructor(private readonly max: number) {}
  push(chunk: Buffer) {
    this.total += chunk.length
    this.chunks.push(chunk)
    this.kept += chunk.length
    while (this.chunks.length > 1 && this.kept - this.chunks[0]!.length >= this.max)
      this.kept -= this.chunks.shift()!.length
  }
  text(): string {
    const all = Buffer.concat(this.chunks)
    return all.subarray(Math.max(0, all.length - this.max)).toString("utf8")
  }
}

/** The shell's own refusal to fork (dash: `/bin/sh: 1: Cannot fork`, bash: `bash: fork: …`), at a line's start. */
const shellCannotFork = /^(?:\/usr)?(?:\/bin\/)?(?:sh|bash|dash): (?:\d+: )?(?:Cannot fork|fork: )/m

/**
 * Which limit ended or starved the command. The wall clock and the output cap are known (we stopped
 * the run); the rlimits are read from the signal they send or the message their refusal prints. A
 * command that exited 0 is read only for the shell's own refusal to fork (a fork bomb's shell exits 0
 * with its forks refused), never for what its output quotes ("Out of memory" in a log line, a tool's
 * retried "Resource temporarily unavailable").
 */
export const runLimit = (observed: {
  readonly stopped: "timeout" | "output" | undefined
  readonly exitCode: number | null
  readonly signal: string | null
  readonly stderr: string
}): SandboxLimit | undefined => {
  if (observed.stopped !== undefined) return observed.stopped
  if (observed.exitCode === 0 && observed.signal === null) {
    return shellCannotFork.test(observed.stderr) ? "processes" : undefined
  }
  if (observed.signal === "SIGXCPU" || /CPU time limit exceeded/.test(observed.stderr)) return "cpu"
  if (observed.signal === "SIGXFSZ" || /File size limit exceeded|File too large/.test(observed.stderr))
    return "file-size"
  if (
    /Cannot fork|fork: Resource temporarily unavailable|fork failed|Resource temporarily unavailable/.test(
      observed.stderr
    )
  )
    return "processes"
  if (/memory exhausted|Cannot allocate memory|[Oo]ut of memory|bad_alloc/.test(observed.stderr)) return "memory"
  return undefined
}

/** A shell-style status 128+n (how bwrap and sh report a child killed by signal n) as the signal's name. */
const signalOfStatus = (code: number | null): string | null => {
  if (code === null || code <= 128 || code > 128 + 64) return null
  const entry = Object.entries(osConstants.signals).find(([, number]) => number === code - 128)
  return entry === undefined ? null : entry[0]
}

export interface RunTracker {
  /** Stops the run if it is still going; resolves once its processes are gone. */
  readonly stop: () => Promise<void>
}

const signalGroup = (pid: number | undefined, signal: NodeJS.Signals) => {
  if (pid === undefined || pid <= 0) return
  try {
    process.kill(-pid, signal)
  } catch {
    // swallow-ok: ESRCH means the group is already gone, which is what the signal was for
  }
}

export const startRun = (
  child: ChildProcess,
  config: SandboxConfig,
  timeoutMs: number,
  onResult: (result: SandboxResult) => void,
  onSpawnError: (message: string) => void
): RunTracker => {
  const started = performance.now()
  const stdout = new Tail(config.tailBytes)
  const stderr = new Tail(config.tailBytes)
  let jailPid: number | undefined
  let stopped: "timeout" | "output" | undefined
  let stopping = false
  let exited: { code: number | null; signal: NodeJS.Signals | null } | undefined
  let settled = false
  let killTimer: NodeJS.Timeout | undefined
  let drainTimer: NodeJS.Timeout | undefined
  const closed = new Promise<void>((resolve) => child.once("close", () => resolve()))

  const terminate = (why: "timeout" | "output" | undefined) => {
    if (stopping || exited !== undefined) return
    stopping = true
    stopped = why
    // SIGTERM to the command's group inside the jail (SIGTERM to bwrap itself would kill the jail at
    // once); until bwrap has said which group that is, the status reader sends it on arrival.
    if (config.mode === "none") signalGroup(child.pid, "SIGTERM")
    else if (jailPid !== undefined) signalGroup(jailPid, "SIGTERM")
    killTimer = setTimeout(() => {
      signalGroup(jailPid, "SIGKILL")
      signalGroup(child.pid, "SIGKILL")
    }, config.killGraceMs)
  }

  const wallClock = setTimeout(() => terminate("timeout"), timeoutMs)
  const onOutput = (tail: Tail) => (chunk: Buffer) => {
    tail.push(chunk)
    if (stdout.total + stderr.total > config.outputBytes) terminate("output")
  }
  child.stdout!.on("data", onOutput(stdout))
  child.stderr!.on("data", onOutput(stderr))
  let status = ""
  let commandStarted = false
  child.stdio[STARTED_FD]?.on("data", () => {
    commandStarted = true
  })
  child.stdio[3]?.on("data", (chunk: Buffer) => {
    status += chunk.toString("utf8")
    const match = /"child-pid":\s*(\d+)/.exec(status)
    if (match !== null && jailPid === undefined) {
      jailPid = Number(match[1])
      if (stopping) signalGroup(jailPid, "SIGTERM")
    }
  })

  child.once("error", (error) => {
    if (settled) return
    settled = true
    clearTimeout(wallClock)
    onSpawnError(error.message)
  })
  child.once("exit", (code, signal) => {
    exited = { code, signal }
    clearTimeout(wallClock)
    // Whatever the command left in its group (on the host, background jobs) goes with it.
    signalGroup(child.pid, "SIGKILL")
    // A process outside that group can still hold the output pipes: on the host (SANDBOX=none), one
    // the command put in a new session (setsid, a daemon), which no signal of ours reaches. The run
    // would wait for it to end, forever for a daemon. After a grace for the output still in the
    // pipes, they are closed on our side. (In the jail nothing outlives bwrap's pid namespace.)
    drainTimer = setTimeout(() => {
      for (const stream of child.stdio) stream?.destroy()
    }, config.killGraceMs)
  })
  void closed.then(() => {
    clearTimeout(killTimer)
    clearTimeout(drainTimer)
    if (settled) return
    settled = true
    const code = exited?.code ?? null
    const signal = exited?.signal ?? signalOfStatus(code)
    const stderrText = stderr.text()
    // bwrap reports its own setup failures (say, an unreachable workspace) as "bwrap: …" and status 1;
    // a command can print that too, so only a run whose command never started is one.
    if (config.mode === "bwrap" && !commandStarted && code === 1 && stopped === undefined) {
      onSpawnError(stderrText.trim().slice(0, 500) || "the jail exited with status 1 before the command started")
      return
    }
    const limit = runLimit({ stopped, exitCode: code, signal, stderr: stderrText })
    const outputCapped = stdout.total + stderr.total > config.outputBytes
    onResult({
      exitCode: code,
      signal,
      stdout: stdout.text(),
      stderr: stderrText,
      stdoutBytes: stdout.total,
      stderrBytes: stderr.total,
      truncated: outputCapped || stdout.total > config.tailBytes || stderr.total > config.tailBytes,
      durationMs: Math.round(performance.now() - started),
      ...(limit === undefined ? {} : { limit })
    })
  })

  return {
    stop: () => {
      if (child.pid === undefined) return Promise.resolve()
      if (exited !== undefined) return closed
      terminate(undefined)
      return closed
    }
  }
}
