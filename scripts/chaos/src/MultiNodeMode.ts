/**
 * `pnpm chaos --postgres [--nodes 3]`: several real server processes on one PostgreSQL database (a
 * fresh one, dropped afterwards) and one shared world directory. Each cycle SIGKILLs one node at a
 * random instant or through a fault point while commands flow through any live node, then restarts
 * it under the same NODE_ID. The same invariants as the single-node run are checked at the end,
 * except that the log may have gaps (rolled-back sequences); it must never skip or reorder.
 * Cron triggers (`* * * * *`, put before the kills) must fire each minute up to the last due one exactly once.
 * One SSE reader per thread follows its stream (the turns' answers stream in deltas) from whichever
 * node it is on; when that node dies it resumes on another with Last-Event-ID, so a resume crosses
 * processes. After the run its messages are judged against the answers and the chunks in PostgreSQL.
 */
import { FaultPoints } from "@orchestration/engine"
import { TestStore } from "@orchestration/engine/testing"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { makeClient } from "./Client.js"
import { allEvents, check, quiesce } from "./Invariants.js"
import { seeded } from "./Random.js"
import { kill, type Server, sleep, start, stop } from "./ServerProcess.js"
import { follow } from "./SseFollower.js"
import { readStoredChunksPostgres } from "./StoredChunks.js"
import { followThread, judge, settleReaders } from "./ThreadStreamFollower.js"
import * as Triggers from "./Triggers.js"
import { message, threadIds } from "./Workload.js"

export interface MultiNodeOptions {
  readonly cycles: number
  readonly seed: number
  readonly threads: number
  readonly nodes: number
  /** Cron triggers (`* * * * *`) put before the kills; their ticks are counted at the end. */
  readonly triggers: number
  readonly log: (line: string) => void
}

const faultPoints = FaultPoints.faultPointNames

export const runMultiNode = async (options: MultiNodeOptions) => {
  const random = seeded(options.seed)
  const database = await TestStore.createRunDatabase("orch_chaos")
  const dataDir = mkdtempSync(join(tmpdir(), "chaos-pg-"))
  const client = makeClient()
  const threads = threadIds(options.threads)
  const triggerIds = Triggers.triggerIds(options.triggers)
  const tickThreads = triggerIds.map(Triggers.threadOf)
  const nodes: Array<Server | undefined> = Array.from({ length: options.nodes }, () => undefined)
  const envOf = (index: number, fault?: string) => ({
    DATABASE_URL: database.url,
    NODE_ID: `node-${index + 1}`,
    ...(fault === undefined ? {} : { FAULT_POINTS: fault })
  })
  const live = () =>
    nodes.filter((n): n is Server => n !== undefined && n.process.exitCode === null && n.process.signalCode === null)
  const anyUrl = () => {
    const up = live()
    return up.length === 0 ? undefined : up[0]!.url
  }
  /**
   * Reader `i` is on node `i mod n` while that node is up and otherwise on the next live one, so the
   * readers spread over the nodes and each kill sends some of them to another process mid-stream.
   */
  const urlFor = (i: number) => () => {
    for (let k = 0; k < nodes.length; k++) {
      const node = nodes[(i + k) % nodes.length]
      if (node !== undefined && live().includes(node)) return node.url
    }
    return undefined
  }
  const follower = follow(anyUrl)
  const readers = threads.map((threadId, i) => followThread(urlFor(i), threadId))
  let kills = 0
  let next = 0

  const startNode = async (index: number, fault?: string) => {
    try {
      nodes[index] = await start(dataDir, envOf(index, fault))
      return true
    } catch (error) {
      nodes[index] = undefined
      const why =
        String(error instanceof Error ? error.message : error)
          .split("\n")
          .find((l) => /fault point|NodeIdInUse|Error|did not/.test(l)) ?? ""
      options.log(`chaos: node-${index + 1} died while starting (${fault ?? "no fault"}) ${why.slice(0, 160)}`)
      return false
    }
  }

  try {
    for (let i = 0; i < options.nodes; i++) await startNode(i)
    // The triggers are in place before the first kill, so their ticks fall among the kills.
    for (const id of triggerIds) client.submit(Triggers.put(id))
    while (!(await client.flush(anyUrl() ?? nodes[0]!.url))) await sleep(100)
    for (let cycle = 1; cycle <= options.cycles; cycle++) {
      // Nodes a fault point killed come back (fault-free) before the cycle's work.
      for (let i = 0; i < options.nodes; i++)
        if (nodes[i] === undefined || !live().includes(nodes[i]!)) await startNode(i)
      const up = live()
      if (up.length === 0) continue
      const victimIndex = random.int(0, options.nodes - 1)
      for (const threadId of threads) client.submit(message(random, threadId, next))
      next++
      const sample = [...client.acked.keys()].filter(() => random.chance(0.1)).slice(0, 5)
      const via = random.pick(up)
      const work = (async () => {
        await client.replay(via.url, sample)
        await client.flush(via.url)
      })().catch(() => undefined) // swallow-ok: a node is killed under the client on purpose; unanswered commands stay queued
      await sleep(random.int(50, 600))
      const victim = nodes[victimIndex]
      if (victim !== undefined) {
        await kill(victim)
        kills++
      }
      await work
      // Restart the victim, sometimes armed with a fault point that kills it again at a chosen step.
      const point = random.chance(0.5) ? random.pick(faultPoints) : undefined
      const fault = point === undefined ? undefined : `${point}:nth=${random.int(1, 3)}`
      await startNode(victimIndex, fault)
      options.log(
        `chaos: cycle ${cycle}/${options.cycles} killed node-${victimIndex + 1} (kill ${kills}; restarted ${fault === undefined ? "clean" : `with ${fault}`}) acked=${client.stats.acked} queued=${client.pending.size}`
      )
    }

    const killsEndedAt = Date.now()
    // Every node back without faults; finish the queued work through node 1; quiesce; check.
    for (let i = 0; i < options.nodes; i++) {
      if (nodes[i] !== undefined) await kill(nodes[i]!)
      await startNode(i)
    }
    const base = nodes[0]!.url
    // One more turn per thread with no kill after it: the readers, spread over the nodes, see it only
    // if a commit made by another node wakes their stream (no reconnect catches them up this time).
    for (const threadId of threads) client.submit(message(random, threadId, next))
    next++
    while (!(await client.flush(base))) await sleep(100)
    let quiet = await quiesce(base, [...threads, ...tickThreads], 600_000)
    // Cron has minute granularity: the last tick that must have fired is the latest minute boundary
    // now, or the first tick when the run was shorter than that; wait for it (bounded), then delete the
    // triggers so no tick starts a turn while the invariants are read.
    const firsts = [...Triggers.firstTicks(await allEvents(base)).values()]
    const lastExpected = Math.max(Triggers.minuteFloor(Date.now()), ...firsts)
    options.log(`chaos: waiting for the trigger ticks up to ${new Date(lastExpected).toISOString()}`)
    const ticked = await Triggers.awaitTicks(base, triggerIds, lastExpected, lastExpected - Date.now() + 90_000)
    for (const id of triggerIds) client.submit(Triggers.remove(id))
    while (!(await client.flush(base))) await sleep(100)
    quiet = (await quiesce(base, [...threads, ...tickThreads], 600_000)) && quiet
    const events = await allEvents(base)
    const ticks = await Triggers.countTicks(base, events, triggerIds, lastExpected, killsEndedAt)
    options.log(`chaos: ${ticks.ticks} trigger ticks, ${ticks.amidKills} of them fired while nodes were being killed`)
    if (!ticked) ticks.details.push("the triggers' schedules did not move past the last expected tick within 90 s")
    const total = events.length
    const deadline = Date.now() + 10_000
    while (follower.seen.length < total && Date.now() < deadline) await sleep(50)
    await follower.stop()
    const behind = await settleReaders(readers, events, deadline)
    const report = await check(base, dataDir, client, [...threads, ...tickThreads], follower.seen, {
      gapsAllowed: true
    })
    report.details.push(...behind)
    if (!quiet) report.details.push("the system did not quiesce within 600 s")
    for (const node of live()) {
      const exit = await stop(node)
      if (exit.code !== 0) report.details.push(`SIGTERM exit code ${exit.code}`)
    }
    // Read with every node stopped: no flush or compaction moves under the judge.
    const stored = await readStoredChunksPostgres(database.url)
    // Retention compacts the chunks of settled steps: the store's half of the judgement covers what is left.
    options.log(`chaos: judging ${stored.length} stream chunks left in PostgreSQL`)
    const stream = judge(readers, stored)
    report.details.push(...stream.details.slice(0, 30))
    const reconnects = readers.reduce((n, r) => n + r.connects(), 0)
    return {
      cycles: options.cycles,
      kills,
      acked: client.stats.acked,
      report,
      ticks,
      stream,
      reconnects,
      dataDir,
      quiet
    }
  } finally {
    // Stopped before the database goes (a reader left running would keep reconnecting).
    for (const reader of readers) await reader.stop()
    await follower.stop()
    for (const node of nodes) if (node !== undefined) await kill(node)
    await TestStore.dropRunDatabase(database.name)
  }
}
