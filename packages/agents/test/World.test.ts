import { assert, describe, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { createHash } from "node:crypto"
import { existsSync } from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import * as Sandbox from "../src/Sandbox.js"
import * as World from "../src/World.js"
import { tempDir } from "./fixtures/tempDir.js"

const openWorld = Effect.flatMap(tempDir, (dir) => World.make({ dir }))

describe("World", () => {
  it.scoped("publishing the same content twice makes one version", () =>
    Effect.gen(function* () {
      const world = yield* openWorld
      const first = yield* world.publish({ path: "docs/a.md", content: "hello" })
      const second = yield* world.publish({ path: "docs/a.md", content: "hello" })
      assert.isTrue(first.newVersion)
      assert.isFalse(second.newVersion)
      assert.strictEqual(second.cid, first.cid)
      assert.deepStrictEqual(yield* world.readVersions("docs/a.md"), [{ cid: first.cid }])
      assert.strictEqual(yield* world.readBlob(first.cid), "hello")
    })
  )

  it.scoped("new content makes a new version, and so does going back to older content", () =>
    Effect.gen(function* () {
      const world = yield* openWorld
      const one = yield* world.publish({ path: "a.md", content: "one" })
      const two = yield* world.publish({ path: "a.md", content: "two" })
      const back = yield* world.publish({ path: "a.md", content: "one" })
      assert.isTrue(back.newVersion)
      assert.deepStrictEqual(yield* world.readVersions("a.md"), [{ cid: one.cid }, { cid: two.cid }, { cid: one.cid }])
    })
  )

  it.scoped("paths that are absolute, escape with .., or are too long are refused and write nothing", () =>
    Effect.gen(function* () {
      const world = yield* openWorld
      const bad = [
        "/etc/passwd",
        "../outside.md",
        "a/../../b.md",
        "a\\b.md",
        "",
        "a//b.md",
        "C:/x.md",
        `${"d/".repeat(128)}x`, // 257 characters
        "z".repeat(250) // one segment too long for a file name
      ]
      for (const badPath of bad) {
        const error = yield* Effect.flip(world.publish({ path: badPath, content: "x" }))
        assert.strictEqual(error._tag, "ToolInputError", badPath)
      }
      assert.isFalse(existsSync(path.join(world.dir, "blobs")))
      assert.isFalse(existsSync(path.join(world.dir, "versions")))
      // A name containing dots is not an escape, and 256 characters are allowed.
      assert.isTrue((yield* world.publish({ path: "notes/v1..v2.md", content: "x" })).newVersion)
      assert.isTrue((yield* world.publish({ path: `${"d/".repeat(4)}${"y".repeat(248)}`, content: "x" })).newVersion)
    })
  )

  it.scoped("perform appends the ledger line before the performance, with the Clock's time", () =>
    Effect.gen(function* () {
      const world = yield* openWorld
      yield* world.perform({
        effectId: "tool:t1:call_1_0",
        attempt: 1,
        threadId: "t1",
        tool: "publish",
        arguments: { path: "a.md", content: "x" }
      })
      yield* TestClock.adjust("5 seconds")
      const answer = yield* world.perform({
        effectId: "tool:t1:call_1_1",
        attempt: 2,
        threadId: "t1",
        tool: "execute",
        arguments: { command: "no-such-tool" }
      })
      // Not in the jail: a non-zero exit is still a performance with a result.
      assert.strictEqual((answer as World.ExecuteResult).exitCode, 127)
      assert.deepStrictEqual(yield* world.readLedger, [
        { effectId: "tool:t1:call_1_0", kind: "tool.publish", attempt: 1, at: "1970-01-01T00:00:00.000Z" },
        { effectId: "tool:t1:call_1_1", kind: "tool.execute", attempt: 2, at: "1970-01-01T00:00:05.000Z" }
      ])
      assert.deepStrictEqual(yield* world.readExecutions, [{ effectId: "tool:t1:call_1_1", command: "no-such-tool" }])
    })
  )

  it.scoped("refused arguments never reach the ledger", () =>
    Effect.gen(function* () {
      const world = yield* openWorld
      const error = yield* Effect.flip(
        world.perform({
          effectId: "tool:t1:call_1_0",
          attempt: 1,
          threadId: "t1",
          tool: "publish",
          arguments: { path: "../x", content: 1 }
        })
      )
      assert.strictEqual(error._tag, "ToolInputError")
      assert.deepStrictEqual(yield* world.readLedger, [])
    })
  )

  it.scoped("execute runs the command in the thread's workspace, after its run is recorded", () =>
    Effect.gen(function* () {
      const world = yield* openWorld
      const result = yield* world.execute(
        { command: "echo hi > f && cat f && exit 3" },
        { effectId: "e1", threadId: "t1" }
      )
      assert.deepStrictEqual([result.exitCode, result.stdout, result.truncated], [3, "hi\n", false])
      assert.deepStrictEqual(yield* world.readExecutions, [
        { effectId: "e1", command: "echo hi > f && cat f && exit 3" }
      ])
      assert.strictEqual(
        yield* Effect.promise(() => fs.readFile(path.join(world.dir, "workspaces", "t1", "f"), "utf8")),
        "hi\n"
      )
      // Another thread has its own workspace.
      assert.strictEqual((yield* world.execute({ command: "cat f" }, { effectId: "e2", threadId: "t2" })).exitCode, 1)
    })
  )

  it.scoped("without bwrap, execute is refused before its ledger line, with a permanent reason", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const world = yield* World.make({ dir, sandbox: { ...Sandbox.defaultConfig, bwrapPath: "/nonexistent/bwrap" } })
      const error = yield* Effect.flip(
        world.perform({
          effectId: "e1",
          attempt: 1,
          threadId: "t1",
          tool: "execute",
          arguments: { command: "touch x" }
        })
      )
      assert.deepStrictEqual(
        [error._tag, error._tag === "SandboxUnavailable" ? error.reason : ""],
        ["SandboxUnavailable", "bwrap-missing"]
      )
      assert.deepStrictEqual(yield* world.readLedger, [])
      assert.deepStrictEqual(yield* world.readExecutions, [])
    })
  )

  it("the wall clock is the kind's timeout less the kill grace, lowered by timeoutSeconds", () => {
    const sandbox = Sandbox.defaultConfig
    assert.strictEqual(World.executeWallClockMs({ command: "x" }, sandbox), 600_000 - sandbox.killGraceMs - 1_000)
    assert.strictEqual(World.executeWallClockMs({ command: "x", timeoutSeconds: 30 }, sandbox), 30_000)
  })

  it.scoped("trigger_edit puts the whole trigger and refuses unsafe ids", () =>
    Effect.gen(function* () {
      const world = yield* openWorld
      yield* world.triggerEdit({ triggerId: "nightly", spec: { cron: "0 3 * * *" } })
      const answer = yield* world.triggerEdit({ triggerId: "nightly", spec: { cron: "0 4 * * *" } })
      assert.deepStrictEqual(answer, { triggerId: "nightly", path: "triggers/nightly.json" })
      assert.deepStrictEqual(yield* world.readTrigger("nightly"), { cron: "0 4 * * *" })
      assert.deepStrictEqual(sorted(yield* Effect.promise(() => fs.readdir(path.join(world.dir, "triggers")))), [
        "nightly.json"
      ])
      for (const triggerId of ["../escape", "a/b", ".hidden", ""]) {
        const error = yield* Effect.flip(world.triggerEdit({ triggerId, spec: {} }))
        assert.strictEqual(error._tag, "ToolInputError", triggerId)
      }
    })
  )
})

describe("World write failures are typed, never swallowed", () => {
  it.scoped("a world under a regular file cannot be opened", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* Effect.promise(() => fs.writeFile(path.join(dir, "file"), ""))
      const error = yield* Effect.flip(World.make({ dir: path.join(dir, "file", "world") }))
      assert.strictEqual(error._tag, "WorldWriteError")
      assert.strictEqual(error.code, "ENOTDIR")
      assert.strictEqual(error.operation, "open world")
    })
  )

  it.scoped("a refused ledger line stops the performance: nothing is performed", () =>
    Effect.gen(function* () {
      const world = yield* openWorld
      // A link to /dev/full would answer ENOSPC, were links followed: the world refuses the link itself.
      yield* Effect.promise(() => fs.symlink("/dev/full", path.join(world.dir, "ledger.jsonl")))
      const error = yield* Effect.flip(
        world.perform({
          effectId: "tool:t1:call_1_0",
          attempt: 1,
          threadId: "t1",
          tool: "execute",
          arguments: { command: "deploy" }
        })
      )
      assert.strictEqual(error._tag, "WorldWriteError")
      assert.strictEqual(error._tag === "WorldWriteError" && error.code, "ELOOP")
      assert.deepStrictEqual(yield* world.readExecutions, [])
    })
  )

  it.scoped("a ledger that cannot be appended to fails recordPerformance", () =>
    Effect.gen(function* () {
      const world = yield* openWorld
      yield* Effect.promise(() => fs.mkdir(path.join(world.dir, "ledger.jsonl")))
      const error = yield* Effect.flip(world.recordPerformance({ effectId: "e1", kind: "tool.publish", attempt: 1 }))
      assert.strictEqual(error.code, "EISDIR")
      assert.strictEqual(error.operation, "record performance")
    })
  )

  it.scoped("a publish whose blob cannot be written fails and records no version", () =>
    Effect.gen(function* () {
      const world = yield* openWorld
      yield* Effect.promise(() => fs.writeFile(path.join(world.dir, "blobs"), "in the way"))
      const error = yield* Effect.flip(world.publish({ path: "a.md", content: "x" }))
      assert.strictEqual(error._tag, "WorldWriteError")
      assert.deepStrictEqual(yield* world.readVersions("a.md"), [])
    })
  )

  it.scoped("an execution log that cannot be appended to fails execute before it answers", () =>
    Effect.gen(function* () {
      const world = yield* openWorld
      yield* Effect.promise(() => fs.mkdir(path.join(world.dir, "executions.jsonl")))
      const error = yield* Effect.flip(world.execute({ command: "make" }, { effectId: "e1", threadId: "t1" }))
      assert.deepStrictEqual(
        [error._tag, error._tag === "WorldWriteError" ? error.code : ""],
        ["WorldWriteError", "EISDIR"]
      )
    })
  )

  it.scoped("a malformed ledger line is reported, not skipped", () =>
    Effect.gen(function* () {
      const world = yield* openWorld
      yield* world.recordPerformance({ effectId: "e1", kind: "tool.publish", attempt: 1 })
      yield* Effect.promise(() => fs.appendFile(path.join(world.dir, "ledger.jsonl"), '{"effectId":\n'))
      const error = yield* Effect.flip(world.readLedger)
      assert.strictEqual(error.code, "MALFORMED_LINE")
      assert.include(error.message, "line 2")
    })
  )
})

describe("the world never writes through a symbolic link", () => {
  /** A world and, beside it, a directory outside the world that must stay untouched. */
  const worldAndOutside = Effect.gen(function* () {
    const dir = yield* tempDir
    const outside = path.join(dir, "outside")
    yield* Effect.promise(() => fs.mkdir(outside))
    yield* Effect.promise(() => fs.writeFile(path.join(outside, "target"), "original"))
    const world = yield* World.make({ dir: path.join(dir, "world") })
    const outsideFiles = () =>
      Effect.promise(async () => {
        const names = sorted(await fs.readdir(outside))
        return Promise.all(names.map(async (name) => [name, await fs.readFile(path.join(outside, name), "utf8")]))
      })
    return { world, outside, outsideFiles }
  })

  it.scoped("a planted file link is refused on every world write, permanently, and nothing lands outside", () =>
    Effect.gen(function* () {
      const { world, outside, outsideFiles } = yield* worldAndOutside
      const target = path.join(outside, "target")
      const plant = (relative: string) =>
        Effect.promise(async () => {
          await fs.mkdir(path.dirname(path.join(world.dir, relative)), { recursive: true })
          await fs.symlink(target, path.join(world.dir, relative))
        })
      yield* plant("ledger.jsonl")
      yield* plant("executions.jsonl")
      yield* plant("versions/a.md.jsonl")
      yield* plant("triggers/nightly.json")
      const cid = createHash("sha256").update("x", "utf8").digest("hex")
      yield* plant(`blobs/${cid}`)
      const failures = [
        yield* Effect.flip(world.recordPerformance({ effectId: "e1", kind: "tool.publish", attempt: 1 })),
        yield* Effect.flip(world.execute({ command: "make" }, { effectId: "e1", threadId: "t1" })),
        yield* Effect.flip(world.publish({ path: "a.md", content: "y" })),
        yield* Effect.flip(world.triggerEdit({ triggerId: "nightly", spec: {} })),
        yield* Effect.flip(world.publish({ path: "b.md", content: "x" }))
      ]
      assert.deepStrictEqual(
        failures.map((e) => [e._tag, "code" in e ? e.code : "", "reason" in e ? e.reason : ""]),
        Array.from({ length: 5 }, () => ["WorldWriteError", "ELOOP", "permanent"])
      )
      assert.include(failures[2]!.message, "versions/a.md.jsonl")
      assert.include(failures[2]!.message, "symbolic link")
      assert.notInclude(failures[2]!.message, world.dir)
      assert.deepStrictEqual(yield* outsideFiles(), [["target", "original"]])
      // The link is still a link: it was neither written through nor replaced.
      assert.isTrue((yield* Effect.promise(() => fs.lstat(path.join(world.dir, "blobs", cid)))).isSymbolicLink())
    })
  )

  it.scoped("a planted directory link is refused, and nothing lands outside", () =>
    Effect.gen(function* () {
      const { world, outside, outsideFiles } = yield* worldAndOutside
      for (const directory of ["versions", "blobs", "triggers"]) {
        yield* Effect.promise(() => fs.symlink(outside, path.join(world.dir, directory)))
      }
      // A link deeper down, under a real directory, is refused as well.
      yield* Effect.promise(() => fs.mkdir(path.join(world.dir, "real")))
      const publishes = [
        yield* Effect.flip(world.publish({ path: "a.md", content: "hello" })),
        yield* Effect.flip(world.triggerEdit({ triggerId: "nightly", spec: {} }))
      ]
      yield* Effect.promise(() => fs.rm(path.join(world.dir, "blobs")))
      yield* Effect.promise(() => fs.mkdir(path.join(world.dir, "blobs")))
      publishes.push(yield* Effect.flip(world.publish({ path: "deep/a.md", content: "hello" })))
      assert.deepStrictEqual(
        publishes.map((e) => [e._tag, "code" in e ? e.code : "", "reason" in e ? e.reason : ""]),
        Array.from({ length: 3 }, () => ["WorldWriteError", "ELOOP", "permanent"])
      )
      assert.deepStrictEqual(yield* outsideFiles(), [["target", "original"]])
      // Reads refuse the link too, instead of reading outside.
      const read = yield* Effect.flip(world.readVersions("a.md"))
      assert.deepStrictEqual([read._tag, read._tag === "WorldReadError" && read.code], ["WorldReadError", "ELOOP"])
    })
  )
})

describe("concurrent publishes and permanent failures", () => {
  it.scoped("8 concurrent publishes of the same content all succeed: one blob, one version", () =>
    Effect.gen(function* () {
      const world = yield* openWorld
      // Repeated rounds: a shared temporary file loses a race only some of the time.
      for (let round = 0; round < 10; round++) {
        const content = `same content ${round}`
        const results = yield* Effect.all(
          Array.from({ length: 8 }, () => Effect.either(world.publish({ path: `shared/${round}.md`, content }))),
          { concurrency: "unbounded" }
        )
        const failures = results.filter((r) => r._tag === "Left")
        assert.deepStrictEqual(failures, [], `round ${round}`)
        const cid = createHash("sha256").update(content, "utf8").digest("hex")
        assert.deepStrictEqual(yield* world.readVersions(`shared/${round}.md`), [{ cid }], `round ${round}`)
        assert.strictEqual(results.filter((r) => r._tag === "Right" && r.right.newVersion).length, 1, `round ${round}`)
      }
      const blobs = yield* Effect.promise(() => fs.readdir(path.join(world.dir, "blobs")))
      assert.strictEqual(blobs.length, 10, JSON.stringify(blobs))
    })
  )

  it.scoped("a blob cut short is written again by the next publish of its content", () =>
    Effect.gen(function* () {
      const world = yield* openWorld
      const first = yield* world.publish({ path: "a.md", content: "hello world" })
      yield* Effect.promise(() => fs.truncate(path.join(world.dir, "blobs", first.cid), 0))
      const again = yield* world.publish({ path: "b.md", content: "hello world" })
      assert.strictEqual(again.cid, first.cid)
      assert.strictEqual(yield* world.readBlob(first.cid), "hello world")
    })
  )

  it.scoped("a path whose versions file is a directory fails permanently, naming the path", () =>
    Effect.gen(function* () {
      const world = yield* openWorld
      yield* world.publish({ path: "a.jsonl/b", content: "x" })
      const error = yield* Effect.flip(world.publish({ path: "a", content: "y" }))
      assert.strictEqual(error._tag, "WorldWriteError")
      const failure = error as World.WorldWriteError
      assert.deepStrictEqual([failure.code, failure.reason, failure.path], ["EISDIR", "permanent", "versions/a.jsonl"])
      assert.include(failure.message, "'a'")
      assert.include(failure.message, "is a directory")
      assert.notInclude(failure.message, world.dir)
    })
  )
})

const sorted = (names: ReadonlyArray<string>) => [...names].sort()
