/**
 * `pnpm chaos`: the real server on a fresh data directory, driven only through HTTP, killed with
 * SIGKILL at random instants and through fault points, restarted, N times; then it quiesces and the
 * invariants are checked. The same seed replays the same schedule. Beside the event follower, one
 * SSE reader per thread follows its stream (deltas included) across every kill, resuming with
 * Last-Event-ID; after the run its messages are judged against the answers and the store.
 */
import { FaultPoints } from "@orchestration/engine"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { makeClient } from "./Client.js"
import { check, quiesce, allEvents } from "./Invariants.js"
import { seeded } from "./Random.js"
import { kill, type Server, sleep, start, stop } from "./ServerProcess.js"
import { alive, carrying, descendantsOf, unstartedOrphans } from "./Processes.js"
import { follow } from "./SseFollower.js"
import { readStoredChunks } from "./StoredChunks.js"
import { followThread, judge, settleReaders } from "./ThreadStreamFollower.js"
import { message, threadIds } from "./Workload.js"

export interface CrashOptions {
  readonly cycles: number
  readonly seed: number
  readonly threads: number
  /** New messages every this many cycles (long runs keep the backlog bounded). Default 1. */
  readonly workEvery?: number
  readonly log: (line: string) => void
}

const faultPoints = FaultPoints.faultPointNames
const kinds = ["tool.execute", "tool.publish", "tool.delegate", "model.step"] as const

export const runCrash = async (options: CrashOptions) => {
  const random = seeded(options.seed)
  const dataDir = mkdtempSync(join(tmpdir(), "chaos-"))
  const client = makeClient()
  const threads = threadIds(options.threads)
  let server: Server | undefined
  let kills = 0
  let faultKills = 0
  let next = 0
  // This run's marker in every command, and the sandbox processes found alive after a kill.
  const marker = `chaosrun${process.pid}`
  let sandboxLeft = 0
  let sandboxSeen = 0
  // Unstarted bwrap orphans found alive 2 s after a kill: judged after the next boot, which ends the
  // orphans bubblewrap can leave when its parent dies inside its setup window (SandboxOrphans.ts).
  // Still alive then: left. Any other process alive 2 s after the kill counts as left at once.
  let afterKill: Array<number> = []
  let sandboxSwept = 0
  const judgeAfterBoot = () => {
    const still = alive(afterKill)
    sandboxLeft += still.length
    sandboxSwept += afterKill.length - still.length
    if (still.length > 0)
      options.log(
        `chaos: ${still.length} sandbox processes outlived their killed server and its restart: ${still.join(" ")}`
      )
    afterKill = []
  }
  const follower = follow(() => server?.url)
  const readers = threads.map((threadId) => followThread(() => server?.url, threadId))

  for (let cycle = 1; cycle <= options.cycles; cycle++) {
    const point = random.chance(0.6) ? random.pick(faultPoints) : undefined
    const filter = point?.startsWith("reactor.") && random.chance(0.6) ? `:kind=${random.pick(kinds)}` : ""
    const fault = point === undefined ? undefined : `${point}${filter}:nth=${random.int(1, 3)}`
    try {
      server = await start(dataDir, fault === undefined ? {} : { FAULT_POINTS: fault })
    } catch (error) {
      // A fault point at boot (reconcile.mid) killed it while starting: that is a kill too.
      kills++
      faultKills++
      server = undefined
      const why =
        String(error instanceof Error ? error.message : error)
          .split("\n")
          .find((l) => /fault point|StoreLocked|Error|did not/.test(l)) ?? ""
      options.log(
        `chaos: cycle ${cycle}/${options.cycles} died while starting (${fault ?? "no fault"}) ${why.slice(0, 160)}`
      )
      continue
    }
    judgeAfterBoot()
    if ((cycle - 1) % (options.workEvery ?? 1) === 0) {
      for (const threadId of threads) client.submit(message(random, threadId, next, marker))
      next++
    }
    const sample = [...client.acked.keys()].filter(() => random.chance(0.1)).slice(0, 5)
    const running = server
    const work = (async () => {
      await client.replay(running.url, sample)
      await client.flush(running.url)
    })().catch(() => undefined) // swallow-ok: the server is killed under the client on purpose; unanswered commands stay queued
    const fired = await Promise.race([
      running.exited.then(() => true),
      sleep(fault === undefined ? random.int(50, 600) : 1_200).then(() => false)
    ])
    if (fired) faultKills++
    // The sandbox processes of this server as it dies: its descendants, and whatever carries the marker.
    const before = new Set([...descendantsOf(running.process.pid!), ...carrying(marker)])
    sandboxSeen += before.size
    await kill(running)
    kills++
    const left = await leftAfterKill(before, marker)
    // Only an orphan whose command never started may wait for the next boot's sweep; a started
    // command (or a sandbox with one inside) alive 2 s after its server's kill escaped it: a violation.
    const unstarted = unstartedOrphans(left)
    const started = left.filter((pid) => !unstarted.includes(pid))
    sandboxLeft += started.length
    if (started.length > 0)
      options.log(
        `chaos: ${started.length} started sandbox processes outlived their killed server: ${started.join(" ")}`
      )
    afterKill = [...new Set([...afterKill, ...unstarted])]
    if (unstarted.length > 0)
      options.log(
        `chaos: ${unstarted.length} unstarted bwrap orphans alive 2 s after the kill (judged after the next boot): ${unstarted.join(" ")}`
      )
    await work
    options.log(
      `chaos: cycle ${cycle}/${options.cycles} kill ${kills} (${fired ? `fault ${fault}` : fault === undefined ? "random instant" : `timer; ${fault} not reached`}) acked=${client.stats.acked} queued=${client.pending.size} sandbox_processes=${before.size} left=${left.length}`
    )
  }

  // The last start: no faults, finish every queued command, let the system quiesce, check.
  server = await start(dataDir)
  const final = server
  judgeAfterBoot()
  while (!(await client.flush(final.url))) await sleep(100)
  const quiet = await quiesce(final.url, threads, 600_000)
  const total = (await allEvents(final.url)).length
  const deadline = Date.now() + 10_000
  while (follower.seen.length < total && Date.now() < deadline) await sleep(50)
  await follower.stop()
  // Each thread's reader has reached its thread's last event (the stream ends nowhere by itself).
  const behind = await settleReaders(readers, await allEvents(final.url), deadline)
  const report = await check(final.url, dataDir, client, threads, follower.seen)
  report.details.push(...behind)
  if (sandboxLeft > 0) report.details.push(`${sandboxLeft} sandbox processes outlived their killed server`)
  if (!quiet) report.details.push("the system did not quiesce within 600 s")
  const exit = await stop(final)
  if (exit.code !== 0) report.details.push(`SIGTERM exit code ${exit.code}`)
  const stream = judge(readers, await readStoredChunks(dataDir))
  report.details.push(...stream.details.slice(0, 30))
  const reconnects = readers.reduce((n, r) => n + r.connects(), 0)
  return {
    cycles: options.cycles,
    kills,
    faultKills,
    sandboxSeen,
    sandboxLeft,
    sandboxSwept,
    acked: client.stats.acked,
    retries: client.stats.retriesAfterAck,
    report,
    stream,
    reconnects,
    dataDir,
    quiet
  }
}

/**
 * The processes of a killed server that are still alive once the kernel had time to end them
 * (bwrap's --die-with-parent is a parent-death signal: near instant), polled for up to 2 s.
 */
const leftAfterKill = async (before: ReadonlySet<number>, marker: string) => {
  let left: Array<number> = []
  for (let i = 0; i < 40; i++) {
    left = [...new Set([...alive([...before]), ...carrying(marker)])]
    if (left.length === 0) return left
    await sleep(50)
  }
  return left
}
