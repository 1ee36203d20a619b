/**
 * The sandbox `execute` runs commands in: `/bin/sh -c <command>` inside bubblewrap, with no network,
 * a read-only `/usr`, fresh `/proc`, `/dev` and a writable `/tmp`, no host `/etc`, an empty
 * environment, its own host name (`sandbox`), no descriptor but stdin, stdout and stderr, and the
 * thread's workspace as its only writable directory. Resource limits are rlimits set by
 * `prlimit` before `bwrap` starts, so they hold for everything in the jail. Running on the host is
 * possible only when the operator asked for it (`mode: "none"`): a missing `bwrap` is a refusal,
 * never a fallback.
 */
import { Effect, Either, Schema } from "effect"
import { spawn } from "node:child_process"
import { createHash } from "node:crypto"
import { accessSync, constants as fsConstants } from "node:fs"
import * as fs from "node:fs/promises"
import * as nodePath from "node:path"
import { Writable } from "node:stream"
import { runLimit, type RunTracker, STARTED_FD, startRun } from "./SandboxRun.js"
import * as Seccomp from "./SandboxSeccomp.js"

// ---------------------------------------------------------------------------------------------
// Configuration

export interface SandboxConfig {
  /** `bwrap`: the jail. `none`: the host, unsafe, for development only (`SANDBOX=none`). */
  readonly mode: "bwrap" | "none"
  readonly bwrapPath: string
  readonly prlimitPath: string
  /** RLIMIT_CPU: SIGXCPU at this many CPU seconds, SIGKILL one second later. */
  readonly cpuSeconds: number
  /** RLIMIT_AS: the address space of each process. */
  readonly memoryBytes: number
  /** RLIMIT_NPROC: processes of the jail's uid (shared by every run at once under that uid; the server's uid when not root). */
  readonly maxProcesses: number
  /** RLIMIT_FSIZE: the largest file a command may write. */
  readonly fileSizeBytes: number
  /** The size of the jail's /tmp (a tmpfs: its pages are host memory that no rlimit counts). */
  readonly tmpBytes: number
  /** Output (stdout plus stderr) after which the run is stopped. */
  readonly outputBytes: number
  /** How much of the end of each stream the result keeps. */
  readonly tailBytes: number
  /** Between SIGTERM and SIGKILL when a run is stopped. */
  readonly killGraceMs: number
  /** The uid/gid commands run as when the server is root, so RLIMIT_NPROC counts only jailed processes. */
  readonly uid: number
  readonly gid: number
}

export const defaultConfig: SandboxConfig = {
  mode: "bwrap",
  bwrapPath: "/usr/bin/bwrap",
  prlimitPath: "/usr/bin/prlimit",
  cpuSeconds: 600,
  memoryBytes: 1024 * 1024 * 1024,
  maxProcesses: 256,
  fileSizeBytes: 1024 * 1024 * 1024,
  tmpBytes: 512 * 1024 * 1024,
  outputBytes: 16 * 1024 * 1024,
  tailBytes: 64 * 1024,
  killGraceMs: 5_000,
  uid: 64_000,
  gid: 64_000
}

type Env = Readonly<Record<string, string | undefined>>

/** A bad SANDBOX_* value, named, so the server refuses to start rather than guess. */
export class SandboxConfigInvalid extends Schema.TaggedError<SandboxConfigInvalid>()("SandboxConfigInvalid", {
  variable: Schema.String,
  message: Schema.String
}) {}

const integerVars = {
  SANDBOX_CPU_SECONDS: ["cpuSeconds", 1, 86_400],
  SANDBOX_MEMORY_BYTES: ["memoryBytes", 16 * 1024 * 1024, 2 ** 48],
  SANDBOX_MAX_PROCESSES: ["maxProcesses", 8, 1_000_000],
  SANDBOX_FILE_SIZE_BYTES: ["fileSizeBytes", 1, 2 ** 48],
  SANDBOX_TMP_BYTES: ["tmpBytes", 1024 * 1024, 2 ** 40],
  SANDBOX_OUTPUT_BYTES: ["outputBytes", 1024, 2 ** 40],
  SANDBOX_KILL_GRACE_MS: ["killGraceMs", 0, 600_000],
  SANDBOX_UID: ["uid", 1, 2 ** 31 - 2],
  SANDBOX_GID: ["gid", 1, 2 ** 31 - 2]
} as const

/** Reads `SANDBOX`, `SANDBOX_BWRAP`, `SANDBOX_PRLIMIT` and the limits above; pure, so tested without a process. */
export const parseConfig = (env: Env): Either.Either<SandboxConfig, SandboxConfigInvalid> => {
  const read = (name: string) => {
    const value = env[name]?.trim()
    return value === undefined || value === "" ? undefined : value
  }
  const mode = read("SANDBOX") ?? "bwrap"
  if (mode !== "bwrap" && mode !== "none") {
    return Either.left(new SandboxConfigInvalid({ variable: "SANDBOX", message: "SANDBOX must be 'bwrap' or 'none'" }))
  }
  const config: { -readonly [K in keyof SandboxConfig]: SandboxConfig[K] } = { ...defaultConfig, mode }
  config.bwrapPath = read("SANDBOX_BWRAP") ?? config.bwrapPath
  config.prlimitPath = read("SANDBOX_PRLIMIT") ?? config.prlimitPath
  for (const [name, [key, min, max]] of Object.entries(integerVars)) {
    const raw = read(name)
    if (raw === undefined) continue
    const value = Number(raw)
    if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value) || value < min || value > max) {
      return Either.left(
        new SandboxConfigInvalid({
          variable: name,
          message: `${name} must be a whole number between ${min} and ${max}`
        })
      )
    }
    config[key] = value
  }
  return Either.right(config)
}

// ---------------------------------------------------------------------------------------------
// Results and refusals

export const SandboxLimit = Schema.Literal("timeout", "cpu", "memory", "processes", "file-size", "output")
export type SandboxLimit = typeof SandboxLimit.Type

/** What the model sees. A non-zero exit is still a run that happened. */
export interface SandboxResult {
  readonly exitCode: number | null
  /** The signal that ended the command, when one did (e.g. SIGKILL after a limit). */
  readonly signal: string | null
  /** The last `tailBytes` of each stream. */
  readonly stdout: string
  readonly stderr: string
  readonly stdoutBytes: number
  readonly stderrBytes: number
  /** Some output was dropped: a stream was longer than its tail, or output was stopped. */
  readonly truncated: boolean
  readonly durationMs: number
  /** The limit that stopped or starved the command, when one did. */
  readonly limit?: SandboxLimit
}

export const SandboxRefusal = Schema.Literal(
  "bwrap-missing",
  "prlimit-missing",
  "setpriv-missing",
  "bad-workspace",
  "spawn-failed"
)
export type SandboxRefusal = typeof SandboxRefusal.Type

/** The command was not started. Permanent: repeating the call cannot help until the operator acts. */
export class SandboxUnavailable extends Schema.TaggedError<SandboxUnavailable>()("SandboxUnavailable", {
  reason: SandboxRefusal,
  message: Schema.String
}) {}

// ---------------------------------------------------------------------------------------------
// The jail

/**
 * How the command becomes unprivileged. Under root, bwrap itself runs as root without a user
 * namespace (so it can reach a workspace under a private data directory) and `setpriv` drops to the
 * jail's uid with no capabilities and no_new_privs: that uid is real, so RLIMIT_NPROC counts it
 * (root is exempt, and a user namespace would map the jail back to root). Otherwise a user namespace
 * and `--cap-drop ALL` do it.
 */
const privilegeArguments = (config: SandboxConfig, jailed: boolean) =>
  jailed
    ? {
        namespaces: ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"],
        prefix: [
          setprivPath,
          "--reuid",
          String(config.uid),
          "--regid",
          String(config.gid),
          "--clear-groups",
          "--inh-caps=-all",
          "--bounding-set=-all",
          "--no-new-privs"
        ]
      }
    : { namespaces: ["--unshare-all", "--cap-drop", "ALL"], prefix: [] }

/** Inside the jail: the host's /usr is its /usr. */
const setprivPath = "/usr/bin/setpriv"

/**
 * The command with no descriptor but its stdio. One the server inherited without close-on-exec (a
 * supervisor's log pipe, a socket-activation listener, a shell redirection: Node marks only the
 * descriptors it opens) passes through prlimit, bwrap and setpriv, and reached the jail: a jailed
 * command wrote to a host file through it (2026-12-05). dash cannot name a descriptor above 9, so bash
 * (Essential in Debian, under the jail's /usr) closes every one above 2 it finds open, then runs the
 * command in sh. Without bash the run fails (127), it never runs unclosed.
 */
const onlyStdio = (command: string): ReadonlyArray<string> => [
  "/bin/bash",
  "-c",
  // First the start mark on STARTED_FD (in the jail: the jail is set up and the command about to run;
  // elsewhere nobody reads it, and a closed descriptor is fine). Without SHLVL, which bash's `exec`
  // sets and exports into the command's otherwise empty environment.
  `{ printf s >&${STARTED_FD}; } 2>/dev/null; for fd in /proc/self/fd/*; do n=\${fd##*/}; [ "$n" -gt 2 ] && eval "exec $n>&-"; done; exec /usr/bin/env -u SHLVL /bin/sh -c "$1"`,
  "sandbox",
  command
]

/** The bwrap arguments for one run; the workspace is bound read-write at `/workspace`. */
export const jailArguments = (
  config: SandboxConfig,
  workspace: string,
  command: string,
  jailed: boolean
): ReadonlyArray<string> => [
  ...privilegeArguments(config, jailed).namespaces,
  // Its own UTS namespace starts as a copy of the host's: the host's name would be readable.
  "--hostname",
  "sandbox",
  "--die-with-parent",
  "--new-session",
  "--ro-bind",
  "/usr",
  "/usr",
  "--symlink",
  "usr/bin",
  "/bin",
  "--symlink",
  "usr/sbin",
  "/sbin",
  "--symlink",
  "usr/lib",
  "/lib",
  "--symlink",
  "usr/lib64",
  "/lib64",
  "--proc",
  "/proc",
  "--dev",
  "/dev",
  // Root runs bwrap without a user namespace: the tmpfs would be root's 0755, and the command (uid
  // 64000 after setpriv) could not write its temporary files (mktemp, sort -T, compilers).
  "--perms",
  "1777",
  // Bounded: a tmpfs's pages are the host's memory, which RLIMIT_AS does not count.
  "--size",
  String(config.tmpBytes),
  "--tmpfs",
  "/tmp",
  "--bind",
  workspace,
  "/workspace",
  "--chdir",
  "/workspace",
  "--clearenv",
  "--setenv",
  "PATH",
  "/usr/local/bin:/usr/bin:/bin",
  "--setenv",
  "HOME",
  "/workspace",
  "--setenv",
  "LANG",
  "C.UTF-8",
  // The outer pid of the jail's init, whose process group holds the command: stops reach it.
  "--json-status-fd",
  "3",
  // No key rings, no new user namespaces (SandboxSeccomp.ts says why); none on another architecture.
  ...(Seccomp.filter === undefined ? [] : ["--seccomp", String(Seccomp.SECCOMP_FD)]),
  ...privilegeArguments(config, jailed).prefix,
  ...onlyStdio(command)
]

/** The rlimits, as `prlimit` arguments; CPU gets one second between SIGXCPU and SIGKILL. */
export const limitArguments = (config: SandboxConfig): ReadonlyArray<string> => [
  `--cpu=${config.cpuSeconds}:${config.cpuSeconds + 1}`,
  `--as=${config.memoryBytes}`,
  `--nproc=${config.maxProcesses}`,
  `--fsize=${config.fileSizeBytes}`,
  "--core=0"
]

const executable = (path: string) => {
  try {
    accessSync(path, fsConstants.X_OK)
    return true
  } catch {
    return false
  }
}

/** Why the sandbox cannot run commands now, or undefined when it can. Checked at each call and at boot. */
export const unavailable = (config: SandboxConfig): SandboxUnavailable | undefined => {
  if (!executable(config.prlimitPath)) {
    return new SandboxUnavailable({
      reason: "prlimit-missing",
      message: `prlimit (util-linux) is not installed at ${config.prlimitPath}; the sandbox cannot set its limits`
    })
  }
  if (config.mode === "bwrap" && !executable(config.bwrapPath)) {
    return new SandboxUnavailable({
      reason: "bwrap-missing",
      message: `bubblewrap is not installed at ${config.bwrapPath}; commands are refused rather than run unsandboxed (install the Debian package bubblewrap)`
    })
  }
  if (config.mode === "bwrap" && isJailed() && !executable(setprivPath)) {
    return new SandboxUnavailable({
      reason: "setpriv-missing",
      message: `setpriv (util-linux) is not installed at ${setprivPath}; the jail cannot drop root`
    })
  }
  return undefined
}

const isJailed = () => process.getuid?.() === 0

/**
 * A thread id as a directory name: itself when it is a safe name, otherwise a digest of it. A digest's
 * name starts with a dot, which a safe name cannot, so no thread id's name is another's digest (named
 * `h-<digest>` until 2026-12-05, which the thread id `h-<digest>` shared with the one digested).
 */
export const workspaceName = (threadId: string): string =>
  /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/.test(threadId)
    ? threadId
    : `.h-${createHash("sha256").update(threadId).digest("hex").slice(0, 32)}`

/**
 * `<root>/<threadId>`, created if missing, and refused unless both are real directories: no symlink
 * is followed, so a link planted there cannot bind some other host directory into the jail. When the
 * jail runs under its own uid, the workspace is handed to that uid.
 */
export const prepareWorkspace = (
  config: SandboxConfig,
  root: string,
  threadId: string
): Effect.Effect<string, SandboxUnavailable> => {
  const path = nodePath.join(root, workspaceName(threadId))
  const refuse = (cause: unknown) =>
    new SandboxUnavailable({
      reason: "bad-workspace",
      message: `the workspace ${path} cannot be used: ${cause instanceof Error ? cause.message : String(cause)}`
    })
  return Effect.tryPromise({
    try: async () => {
      for (const dir of [root, path]) {
        await fs.mkdir(dir, { mode: dir === root ? 0o755 : 0o700 }).catch((error: NodeJS.ErrnoException) => {
          if (error.code !== "EEXIST") throw error
        })
        const handle = await fs.open(dir, fsConstants.O_RDONLY | fsConstants.O_DIRECTORY | fsConstants.O_NOFOLLOW)
        try {
          if (!(await handle.stat()).isDirectory()) throw new Error(`${dir} is not a directory`)
          if (dir === path && isJailed() && config.mode === "bwrap") await handle.chown(config.uid, config.gid)
        } finally {
          await handle.close()
        }
      }
      return path
    },
    catch: refuse
  })
}

export interface RunRequest {
  readonly command: string
  /** An existing directory, checked by the caller to be a real directory (not a symlink). */
  readonly workspace: string
  readonly timeoutMs: number
}

/**
 * Runs the command and waits for it. Interrupting the effect stops the run (SIGTERM to the jail's
 * process group, SIGKILL after the grace) and waits until no process of it is left.
 */
export const run = (config: SandboxConfig, request: RunRequest): Effect.Effect<SandboxResult, SandboxUnavailable> =>
  Effect.suspend(() => {
    const refusal = unavailable(config)
    if (refusal !== undefined) return Effect.fail(refusal)
    // Root hands the jail to a dedicated uid: RLIMIT_NPROC counts per real uid, and root is exempt.
    const jailed = isJailed() && config.mode === "bwrap"
    const inJail = config.mode === "bwrap"
    const program = inJail
      ? [config.bwrapPath, ...jailArguments(config, request.workspace, request.command, jailed)]
      : onlyStdio(request.command)
    return Effect.async<SandboxResult, SandboxUnavailable>((resume) => {
      let tracker: RunTracker
      try {
        const child = spawn(config.prlimitPath, [...limitArguments(config), "--", ...program], {
          stdio: [
            "ignore",
            "pipe",
            "pipe",
            inJail ? "pipe" : "ignore",
            inJail ? "pipe" : "ignore",
            inJail && Seccomp.filter !== undefined ? "pipe" : "ignore"
          ],
          // Its own process group, so a stop reaches prlimit/bwrap and everything they started.
          detached: true,
          ...(inJail
            ? { env: {} }
            : {
                cwd: request.workspace,
                env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: request.workspace, LANG: "C.UTF-8" }
              })
        })
        // bwrap reads the filter to its end before it starts the jail; a few hundred bytes fit the pipe.
        const seccompPipe = (child.stdio as ReadonlyArray<unknown>)[Seccomp.SECCOMP_FD]
        if (Seccomp.filter !== undefined && seccompPipe instanceof Writable) {
          // swallow-ok: bwrap gone before reading it (a spawn failure) is reported by the run itself
          seccompPipe.on("error", () => undefined)
          seccompPipe.end(Seccomp.filter)
        }
        tracker = startRun(
          child,
          config,
          request.timeoutMs,
          (result) => resume(Effect.succeed(result)),
          (message) => resume(Effect.fail(new SandboxUnavailable({ reason: "spawn-failed", message })))
        )
      } catch (cause) {
        resume(
          Effect.fail(
            new SandboxUnavailable({
              reason: "spawn-failed",
              message: cause instanceof Error ? cause.message : String(cause)
            })
          )
        )
        return
      }
      return Effect.promise(() => tracker.stop())
    })
  })

export { runLimit }
