import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Fiber } from "effect"
import { spawn } from "node:child_process"
import { closeSync, openSync, readFileSync } from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as Sandbox from "../src/Sandbox.js"
import { runLimit } from "../src/SandboxRun.js"
import { processesWith } from "./fixtures/agents.js"
import { tempDir } from "./fixtures/tempDir.js"

/** Small limits, so each one is reached quickly by a real command. */
const config: Sandbox.SandboxConfig = {
  ...Sandbox.defaultConfig,
  cpuSeconds: 1,
  memoryBytes: 256 * 1024 * 1024,
  maxProcesses: 64,
  fileSizeBytes: 1024 * 1024,
  outputBytes: 1024 * 1024,
  killGraceMs: 1_000
}

const workspace = (threadId = "t1", sandboxConfig = config) =>
  Effect.flatMap(tempDir, (dir) => Sandbox.prepareWorkspace(sandboxConfig, path.join(dir, "workspaces"), threadId))

const run = (ws: string, command: string, timeoutMs = 60_000, sandboxConfig = config) =>
  Sandbox.run(sandboxConfig, { command, workspace: ws, timeoutMs })

describe("Sandbox", () => {
  it.scoped("a non-zero exit is a result with its output, and files stay in the workspace for the next run", () =>
    Effect.gen(function* () {
      const ws = yield* workspace()
      const first = yield* run(ws, "echo hi > f && cat f && exit 3")
      assert.strictEqual(first.exitCode, 3)
      assert.strictEqual(first.stdout, "hi\n")
      assert.isFalse(first.truncated)
      assert.isUndefined(first.limit)
      const second = yield* run(ws, "cat f; pwd; echo $HOME")
      assert.strictEqual(second.stdout, "hi\n/workspace\n/workspace\n")
      assert.strictEqual(yield* Effect.promise(() => fs.readFile(path.join(ws, "f"), "utf8")), "hi\n")
    })
  )

  it.scoped("the jail has no host secrets, no network, a read-only /usr, an empty environment and no root", () =>
    Effect.gen(function* () {
      const ws = yield* workspace()
      const shadow = yield* run(ws, "cat /etc/shadow")
      assert.notStrictEqual(shadow.exitCode, 0)
      const dns = yield* run(ws, "getent hosts example.com")
      assert.notStrictEqual(dns.exitCode, 0)
      const net = yield* run(ws, "cat /proc/net/dev")
      assert.notInclude(net.stdout, "eth0")
      const usr = yield* run(ws, "touch /usr/planted")
      assert.notStrictEqual(usr.exitCode, 0)
      assert.include(usr.stderr, "Read-only file system")
      const env = yield* run(ws, "env | cut -d= -f1 | sort | tr '\\n' ' '")
      assert.strictEqual(env.stdout, "HOME LANG PATH PWD ")
      if (process.getuid?.() === 0) assert.strictEqual((yield* run(ws, "id -u")).stdout, `${config.uid}\n`)
      // The host's name (often the machine's or the container's identity) is not the jail's.
      const name = yield* run(ws, "cat /proc/sys/kernel/hostname")
      assert.strictEqual(name.stdout, "sandbox\n")
    })
  )

  it.scoped("the jail's fresh /tmp is the command's to write (it was root's 0755 when the server runs as root)", () =>
    Effect.gen(function* () {
      const ws = yield* workspace()
      const result = yield* run(ws, 'f=$(mktemp) && echo ok > "$f" && cat "$f" && printf \'b\\na\\n\' | sort -T /tmp')
      assert.strictEqual(result.exitCode, 0, `stderr: ${result.stderr}`)
      assert.strictEqual(result.stdout, "ok\na\nb\n")
    })
  )

  it.scoped("a descriptor the server inherited from its launcher is not reachable from inside the jail", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const ws = yield* Sandbox.prepareWorkspace(config, path.join(dir, "workspaces"), "t1")
      const hostFile = path.join(dir, "host-file.log")
      const fd = openSync(hostFile, "w")
      const packageDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
      // A server process started with one more open descriptor (fd 20), as a supervisor, socket
      // activation or a shell redirection leaves it; the jailed command tries to write through it.
      const script = `
        const Sandbox = await import(${JSON.stringify(path.join(packageDir, "dist/src/Sandbox.js"))})
        const { Effect } = await import("effect")
        const result = await Effect.runPromise(Sandbox.run({ ...Sandbox.defaultConfig }, {
          command: "bash -c 'echo written-from-the-jail >&20'; ls /proc/self/fd",
          workspace: ${JSON.stringify(ws)},
          timeoutMs: 30000
        }))
        process.stdout.write(JSON.stringify(result))`
      const out = yield* Effect.promise(
        () =>
          new Promise<string>((resolve) => {
            const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
              cwd: packageDir,
              stdio: ["ignore", "pipe", "inherit", ...Array.from({ length: 17 }, () => "ignore" as const), fd]
            })
            let text = ""
            child.stdout!.on("data", (chunk) => {
              text += chunk
            })
            child.on("close", () => resolve(text))
          })
      )
      closeSync(fd)
      const result = JSON.parse(out) as Sandbox.SandboxResult
      assert.strictEqual(readFileSync(hostFile, "utf8"), "", `written outside the jail; the run: ${out}`)
      // Only stdio (and the descriptor `ls` opens on the directory it lists) is open in the jail.
      assert.deepStrictEqual(result.stdout.trim().split("\n"), ["0", "1", "2", "3"])
    })
  )

  it.scoped("a fork bomb is stopped by the process limit and reported, and none of it is left", () =>
    Effect.gen(function* () {
      const ws = yield* workspace()
      const bomb = "b(){ b|b& };b; sleep 1 # bomb-7f3a"
      const result = yield* run(ws, bomb)
      assert.strictEqual(result.limit, "processes")
      assert.deepStrictEqual(processesWith(bomb), [])
    })
  )

  it.scoped("a 2 GiB allocation is refused by the memory limit and reported", () =>
    Effect.gen(function* () {
      const ws = yield* workspace()
      // CPU to spare, so the memory limit is the one reached.
      const result = yield* run(ws, "head -c 2G /dev/zero | sort > /dev/null", 60_000, {
        ...config,
        cpuSeconds: 120,
        memoryBytes: 64 * 1024 * 1024
      })
      assert.notStrictEqual(result.exitCode, 0)
      assert.strictEqual(result.limit, "memory")
    })
  )

  it.scoped(
    "100 MB of output is stopped by the output limit; each stream keeps its last 64 KiB and its byte count",
    () =>
      Effect.gen(function* () {
        const ws = yield* workspace()
        const result = yield* run(ws, "echo start >&2; head -c 100M /dev/zero | tr '\\0' x; echo never")
        assert.strictEqual(result.limit, "output")
        assert.isTrue(result.truncated)
        assert.isAtMost(result.stdout.length, config.tailBytes)
        assert.isAbove(result.stdoutBytes, config.outputBytes - 10)
        assert.isBelow(result.stdoutBytes, 100 * 1024 * 1024)
        assert.strictEqual(result.stderr, "start\n")
        assert.strictEqual(result.stderrBytes, 6)
        assert.notInclude(result.stdout, "never")
      })
  )

  it.scoped("the CPU and file-size limits end the command and are reported", () =>
    Effect.gen(function* () {
      const ws = yield* workspace()
      const cpu = yield* run(ws, "while :; do :; done")
      assert.strictEqual(cpu.limit, "cpu")
      assert.strictEqual(cpu.signal, "SIGXCPU")
      const big = yield* run(ws, "head -c 2M /dev/zero > big")
      assert.strictEqual(big.limit, "file-size")
      assert.strictEqual((yield* Effect.promise(() => fs.stat(path.join(ws, "big")))).size, config.fileSizeBytes)
    })
  )

  it.scoped("the wall clock stops a run with SIGTERM and is reported; no process is left", () =>
    Effect.gen(function* () {
      const ws = yield* workspace()
      const result = yield* run(ws, "sleep 6001", 500)
      assert.strictEqual(result.limit, "timeout")
      assert.strictEqual(result.signal, "SIGTERM")
      assert.isBelow(result.durationMs, 30_000)
      assert.deepStrictEqual(processesWith("sleep", "6001"), [])
    })
  )

  it.scoped(
    "interrupting a run sends SIGTERM, then SIGKILL after the grace to what ignores it, and waits until nothing is left",
    () =>
      Effect.gen(function* () {
        const ws = yield* workspace()
        const fiber = yield* Effect.fork(run(ws, "trap '' TERM; sleep 6002; sleep 6003"))
        yield* Effect.promise(async () => {
          for (let i = 0; i < 300 && processesWith("sleep", "6002").length === 0; i++)
            await new Promise((r) => setTimeout(r, 100))
        })
        assert.strictEqual(processesWith("sleep", "6002").length, 1)
        const started = performance.now()
        yield* Fiber.interrupt(fiber)
        // The trap makes the shell and its sleep ignore SIGTERM: only the SIGKILL after the grace ends them.
        assert.isAtLeast(performance.now() - started, config.killGraceMs - 50)
        assert.deepStrictEqual(processesWith("sleep", "6002"), [])
        assert.deepStrictEqual(processesWith("sleep", "6003"), [])
      })
  )

  it.scoped("without bwrap, a command is refused with a permanent reason and nothing runs", () =>
    Effect.gen(function* () {
      const ws = yield* workspace()
      const error = yield* Effect.flip(run(ws, "touch ran", 60_000, { ...config, bwrapPath: "/nonexistent/bwrap" }))
      assert.strictEqual(error._tag, "SandboxUnavailable")
      assert.strictEqual(error.reason, "bwrap-missing")
      assert.deepStrictEqual(yield* Effect.promise(() => fs.readdir(ws)), [])
    })
  )

  it.scoped("SANDBOX=none runs on the host, in the workspace, with the limits still set", () =>
    Effect.gen(function* () {
      const host = { ...config, mode: "none" as const }
      const ws = yield* workspace("t1", host)
      const result = yield* run(ws, "pwd; test -e /etc/hostname && echo host", 60_000, host)
      assert.strictEqual(result.stdout, `${ws}\nhost\n`)
      assert.strictEqual((yield* run(ws, "head -c 2M /dev/zero > big", 60_000, host)).limit, "file-size")
    })
  )

  it.scoped(
    "SANDBOX=none: a command that leaves a process in a new session holding its output ends with the command",
    () =>
      Effect.gen(function* () {
        const host = { ...config, mode: "none" as const }
        const ws = yield* workspace("t1", host)
        // setsid takes the process out of the run's group, so no stop reaches it, and it keeps the
        // output pipes open: the run waited for it to end (here two minutes; `sleep infinity`: never).
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            for (const pid of processesWith("sleep", "119.5")) process.kill(Number(pid), "SIGKILL")
          })
        )
        // Before the fix this waited past the test's timeout (60 s) for the sleep.
        const result = yield* run(ws, "setsid sleep 119.5 & sleep 1; echo started", 60_000, host)
        assert.strictEqual(result.stdout, "started\n")
        assert.strictEqual(result.exitCode, 0)
      })
  )

  it.scoped("a workspace that is a symlink is refused, not followed", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const root = path.join(dir, "workspaces")
      yield* Effect.promise(async () => {
        await fs.mkdir(root)
        await fs.symlink("/etc", path.join(root, "t1"))
      })
      const error = yield* Effect.flip(Sandbox.prepareWorkspace(config, root, "t1"))
      assert.strictEqual(error.reason, "bad-workspace")
      // An unsafe thread id becomes a digest, never a path.
      assert.match(Sandbox.workspaceName("../etc"), /^\.h-[0-9a-f]{32}$/)
    })
  )

  it.scoped("two thread ids never share a workspace: a digest's name is not a safe thread id's", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const root = path.join(dir, "workspaces")
      // `.private` is a valid thread id but not a safe directory name, so it gets a digest's name;
      // that name must not be one another thread id (which a model may name in `delegate`) uses as is.
      const victim = ".private"
      const other = Sandbox.workspaceName(victim).replace(/^\./, "")
      assert.notStrictEqual(Sandbox.workspaceName(victim), Sandbox.workspaceName(other))
      const mine = yield* Sandbox.prepareWorkspace(config, root, victim)
      yield* run(mine, "echo secret-of-private > notes")
      const theirs = yield* Sandbox.prepareWorkspace(config, root, other)
      const read = yield* run(theirs, "cat notes 2>/dev/null; true")
      assert.strictEqual(read.stdout, "", `thread '${other}' read the workspace of thread '${victim}'`)
    })
  )

  it.scoped(
    "a command that ran is a result even when it says 'bwrap: …' and exits 1; a jail that never started is a refusal",
    () =>
      Effect.gen(function* () {
        const ws = yield* workspace()
        // A nested bwrap failing inside the jail, or any tool whose messages start that way.
        const ran = yield* Effect.either(run(ws, "touch ran; echo 'bwrap: cannot do that' >&2; exit 1"))
        assert.deepStrictEqual(yield* Effect.promise(() => fs.readdir(ws)), ["ran"])
        assert.isTrue(Either.isRight(ran), `a command that ran was reported as not started: ${JSON.stringify(ran)}`)
        assert.strictEqual(Either.getOrThrow(ran).exitCode, 1)
        // A workspace gone before the run: bwrap cannot bind it, the command never runs.
        const gone = yield* workspace("t2")
        yield* Effect.promise(() => fs.rm(gone, { recursive: true }))
        const refused = yield* Effect.flip(run(gone, "echo should-not-run"))
        assert.strictEqual(refused.reason, "spawn-failed")
        assert.match(refused.message, /^bwrap: /)
      })
  )

  it.scoped("a command that succeeded and only mentioned a refusal in its output hit no limit", () =>
    Effect.gen(function* () {
      const ws = yield* workspace()
      const result = yield* run(
        ws,
        "printf 'retrying: Resource temporarily unavailable\\nsaw: Out of memory in log\\n' >&2; exit 0"
      )
      assert.strictEqual(result.exitCode, 0)
      assert.isUndefined(result.limit, `an exit-0 run is reported as stopped by a limit: ${JSON.stringify(result)}`)
    })
  )
})

describe("the jail's /tmp", () => {
  it.scoped("is bounded by SANDBOX_TMP_BYTES: its pages are the host's memory, which no rlimit counts", () =>
    Effect.gen(function* () {
      const small = { ...config, tmpBytes: 4 * 1024 * 1024 }
      const ws = yield* workspace("t1", small)
      // Each file under the file-size limit (1 MiB here); together past /tmp's size.
      const full = yield* run(
        ws,
        "for i in 1 2 3 4 5 6 7 8; do head -c 768K /dev/zero > /tmp/f$i || exit 7; done",
        60_000,
        small
      )
      assert.strictEqual(full.exitCode, 7, full.stderr)
      assert.match(full.stderr, /No space left on device/)
      const fits = yield* run(ws, "head -c 768K /dev/zero > /tmp/f && wc -c < /tmp/f", 60_000, small)
      assert.strictEqual(fits.stdout.trim(), String(768 * 1024))
    })
  )
})

describe("the jail's seccomp filter", () => {
  it.scoped("a thread's command cannot leave data in a kernel key ring for another thread's command", () =>
    Effect.gen(function* () {
      const a = yield* workspace("thread-a")
      const b = yield* workspace("thread-b")
      const name = `msg-${Date.now()}-${process.pid}`
      // add_key(2) and keyctl(2) through python's ctypes (no keyutils needed); -4 is the user key ring @u.
      const [addKey, keyctl] = process.arch === "arm64" ? [217, 219] : [248, 250]
      const lib = "import ctypes;l=ctypes.CDLL(None,use_errno=True);l.syscall.restype=ctypes.c_long"
      const put = `${lib};r=l.syscall(${addKey},b"user",b"${name}",b"left-by-thread-a",16,ctypes.c_int(-4));print(r,ctypes.get_errno())`
      const get = `${lib};k=l.syscall(${keyctl},10,ctypes.c_int(-4),b"user",b"${name}",0);b=ctypes.create_string_buffer(64);l.syscall(${keyctl},11,ctypes.c_long(k),b,64);print(b.value.decode())`
      const stored = yield* run(a, `python3 -c '${put}'`)
      assert.strictEqual(stored.exitCode, 0, stored.stderr)
      assert.strictEqual(stored.stdout, "-1 1\n", "add_key is refused with EPERM")
      const read = yield* run(b, `python3 -c '${get}'`)
      assert.notInclude(read.stdout, "left-by-thread-a", "thread b read what thread a's command left in the kernel")
    })
  )

  it.scoped("a command cannot hold memory no limit counts: memfd_create and SysV shared memory are unavailable", () =>
    Effect.gen(function* () {
      const ws = yield* workspace()
      const shmget = process.arch === "arm64" ? 194 : 29
      // Pages of a memfd or a shm segment are neither the process's address space (RLIMIT_AS) nor /tmp's.
      const probe = yield* run(
        ws,
        `python3 -c 'import os,ctypes,errno
try:
    os.memfd_create("x"); print("memfd made")
except OSError as e: print("memfd", errno.errorcode[e.errno])
l=ctypes.CDLL(None,use_errno=True); l.syscall.restype=ctypes.c_long
print("shmget", l.syscall(${shmget}, 0, 1<<20, 0o1600), errno.errorcode.get(ctypes.get_errno()))'`
      )
      assert.strictEqual(probe.exitCode, 0, probe.stderr)
      assert.strictEqual(probe.stdout, "memfd ENOSYS\nshmget -1 ENOSYS\n")
    })
  )

  it.scoped("a command cannot make a user namespace (every capability inside it); ordinary processes still start", () =>
    Effect.gen(function* () {
      const ws = yield* workspace()
      const userNamespace = yield* run(ws, "unshare -U -r id -u")
      assert.notStrictEqual(userNamespace.exitCode, 0, userNamespace.stdout)
      assert.match(userNamespace.stderr, /Operation not permitted/)
      // Forks, pipes, threads and a subprocess from python (clone3 refused as unknown: it falls back to clone).
      const ordinary = yield* run(
        ws,
        'x=$(echo hi | tr a-z A-Z); echo $x; python3 -c \'import subprocess,threading;t=threading.Thread(target=print,args=("thread",));t.start();t.join();print(subprocess.run(["echo","child"],capture_output=True,text=True).stdout.strip())\''
      )
      assert.strictEqual(ordinary.exitCode, 0, ordinary.stderr)
      assert.strictEqual(ordinary.stdout, "HI\nthread\nchild\n")
    })
  )
})

describe("Sandbox limits, given/when/then", () => {
  it("given a run we stopped, the reason is ours; given a signal or a refusal message, the rlimit behind it", () => {
    const failed = { stopped: undefined, exitCode: 1, signal: null }
    assert.strictEqual(runLimit({ stopped: "timeout", exitCode: null, signal: "SIGTERM", stderr: "" }), "timeout")
    assert.strictEqual(runLimit({ stopped: undefined, exitCode: null, signal: "SIGXCPU", stderr: "" }), "cpu")
    assert.strictEqual(runLimit({ stopped: undefined, exitCode: null, signal: "SIGXFSZ", stderr: "" }), "file-size")
    assert.strictEqual(runLimit({ ...failed, stderr: "/bin/sh: 1: Cannot fork\n" }), "processes")
    assert.strictEqual(runLimit({ ...failed, stderr: "sort: memory exhausted\n" }), "memory")
    assert.isUndefined(runLimit({ ...failed, stderr: "cat: f: No such file or directory\n" }))
    // Exit 0: only the shell's own refusal to fork counts (a fork bomb's shell goes on), not a quote.
    const succeeded = { stopped: undefined, exitCode: 0, signal: null }
    assert.strictEqual(runLimit({ ...succeeded, stderr: "x\n/bin/sh: 1: Cannot fork\n" }), "processes")
    assert.strictEqual(
      runLimit({ ...succeeded, stderr: "bash: fork: Resource temporarily unavailable\n" }),
      "processes"
    )
    assert.isUndefined(runLimit({ ...succeeded, stderr: "retry: Resource temporarily unavailable\n" }))
    assert.isUndefined(runLimit({ ...succeeded, stderr: "log: Out of memory\nsort: memory exhausted\n" }))
  })

  it("given SANDBOX_* variables, the config has them; given a bad one, it is named", () => {
    const parsed = Sandbox.parseConfig({
      SANDBOX_CPU_SECONDS: "30",
      SANDBOX_MAX_PROCESSES: "100",
      SANDBOX_OUTPUT_BYTES: "4096",
      SANDBOX_TMP_BYTES: "1048576"
    })
    assert.deepStrictEqual(Either.getOrThrow(parsed), {
      ...Sandbox.defaultConfig,
      cpuSeconds: 30,
      maxProcesses: 100,
      outputBytes: 4096,
      tmpBytes: 1048576
    })
    const tiny = Sandbox.parseConfig({ SANDBOX_TMP_BYTES: "4096" })
    assert.isTrue(Either.isLeft(tiny) && tiny.left.variable === "SANDBOX_TMP_BYTES")
    assert.strictEqual(Either.getOrThrow(Sandbox.parseConfig({ SANDBOX: "none" })).mode, "none")
    const bad = Sandbox.parseConfig({ SANDBOX_MEMORY_BYTES: "lots" })
    assert.isTrue(Either.isLeft(bad) && bad.left.variable === "SANDBOX_MEMORY_BYTES")
    assert.isTrue(Either.isLeft(Sandbox.parseConfig({ SANDBOX: "off" })))
  })
})
