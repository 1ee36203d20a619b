/**
 * A booting server ends the sandboxes a dead server left behind (a bwrap orphaned inside its own
 * setup window, blocked forever): only orphaned bwraps bound to a workspace of this world, never a
 * live server's, never another world's.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { spawn, spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Sandbox from "../src/Sandbox.js"
import * as SandboxOrphans from "../src/SandboxOrphans.js"
import { processesWith } from "./fixtures/agents.js"

const alive = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z"
  } catch {
    return false
  }
}

const killIfAlive = (pid: number) => {
  try {
    process.kill(pid, "SIGKILL")
  } catch {
    // swallow-ok: already ended
  }
}

/** A process named bwrap whose arguments bind `workspace`, as bubblewrap's stuck child is. */
const bwrapLike = (workspace: string) => ["-c", "sleep 600; :", "bwrap", "--bind", workspace, "/workspace"]

/** Started by a shell that exits at once, so its parent becomes init: an orphan. Answers its pid. */
const orphan = (workspace: string): number => {
  const quoted = bwrapLike(workspace)
    .map((a) => `'${a}'`)
    .join(" ")
  const out = spawnSync("bash", ["-c", `(exec -a bwrap bash ${quoted} >/dev/null 2>&1 & echo $!)`], {
    encoding: "utf8"
  })
  return Number(out.stdout.trim())
}

describe("sandboxes a dead server left behind", () => {
  it.live("a live server's real jail (outer and inner bwrap) is not an orphan while its command runs", () =>
    Effect.gen(function* () {
      const world = mkdtempSync(join(tmpdir(), "orphans-live-"))
      const ws = yield* Sandbox.prepareWorkspace(Sandbox.defaultConfig, join(world, "workspaces"), "t1")
      const running = yield* Effect.fork(
        Sandbox.run(Sandbox.defaultConfig, { command: "sleep 2; echo done", workspace: ws, timeoutMs: 60_000 })
      )
      for (let i = 0; i < 100 && processesWith("sleep 2; echo done").length < 2; i++) yield* Effect.sleep("20 millis")
      assert.isAtLeast(processesWith("sleep 2; echo done").length, 2)
      assert.deepStrictEqual(yield* SandboxOrphans.sweep(join(world, "workspaces")), [])
      const result = yield* Fiber.join(running)
      assert.strictEqual(result.stdout, "done\n")
    })
  )

  it("only an orphaned bwrap bound under this world's workspaces is one (pure)", () => {
    const root = "/data/world/workspaces"
    const argv = ["/usr/bin/bwrap", "--unshare-pid", "--bind", "/data/world/workspaces/t1", "/workspace"]
    assert.isTrue(SandboxOrphans.isOrphanOf({ pid: 10, ppid: 1, argv }, root))
    // A live server's bwrap has that server (or its outer bwrap) as parent.
    assert.isFalse(SandboxOrphans.isOrphanOf({ pid: 10, ppid: 4242, argv }, root))
    // Another world's, another program's, or one that binds elsewhere.
    assert.isFalse(SandboxOrphans.isOrphanOf({ pid: 10, ppid: 1, argv }, "/other/world/workspaces"))
    assert.isFalse(SandboxOrphans.isOrphanOf({ pid: 10, ppid: 1, argv: ["/usr/bin/sleep", ...argv.slice(1)] }, root))
    assert.isFalse(
      SandboxOrphans.isOrphanOf({ pid: 10, ppid: 1, argv: ["bwrap", "--bind", "/data/world/workspaces-x/t1"] }, root)
    )
  })

  it("given a subreaper, the jail's inner bwrap whose parent is no bwrap is an orphan; the outer one is not (pure)", () => {
    const root = "/data/world/workspaces"
    const argv = ["/usr/bin/bwrap", "--unshare-pid", "--bind", "/data/world/workspaces/t1", "/workspace"]
    // Orphaned under a subreaper (systemd's user manager, a container's init): its parent is that.
    assert.isTrue(
      SandboxOrphans.isOrphanOf(
        { pid: 10, ppid: 77, argv, nestedPidNamespace: true, parentProgram: "/sbin/tini" },
        root
      )
    )
    // A live jail's inner bwrap has its outer bwrap as parent.
    assert.isFalse(
      SandboxOrphans.isOrphanOf(
        { pid: 10, ppid: 9, argv, nestedPidNamespace: true, parentProgram: "/usr/bin/bwrap" },
        root
      )
    )
    // The outer bwrap lives in the server's PID namespace, with the server as its parent.
    assert.isFalse(
      SandboxOrphans.isOrphanOf({ pid: 9, ppid: 4242, argv, nestedPidNamespace: false, parentProgram: "node" }, root)
    )
  })

  it.live("a real orphan of this world is ended; a live parent's and another world's are left running", () =>
    Effect.gen(function* () {
      const world = mkdtempSync(join(tmpdir(), "orphans-"))
      const other = mkdtempSync(join(tmpdir(), "orphans-other-"))
      const mine = orphan(join(world, "workspaces", "t1"))
      const foreign = orphan(join(other, "workspaces", "t1"))
      // A child of this process (a live server's sandbox) with the same arguments.
      const live = spawn("bash", bwrapLike(join(world, "workspaces", "t2")), { argv0: "bwrap", stdio: "ignore" })
      yield* Effect.gen(function* () {
        assert.isTrue(alive(mine) && alive(foreign) && alive(live.pid!))
        const killed = yield* SandboxOrphans.sweep(join(world, "workspaces"))
        assert.deepStrictEqual(killed, [mine])
        for (let i = 0; i < 40 && alive(mine); i++) yield* Effect.sleep("50 millis")
        assert.isFalse(alive(mine))
        assert.isTrue(alive(foreign))
        assert.isTrue(alive(live.pid!))
      }).pipe(Effect.ensuring(Effect.sync(() => [mine, foreign, live.pid!].forEach(killIfAlive))))
    })
  )
})
