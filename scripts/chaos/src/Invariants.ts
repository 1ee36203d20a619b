/**
 * What must hold after any schedule of kills, checked only through the HTTP API and the world
 * directory, as an outside observer would.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { type Client, json } from "./Client.js"
import { RUNS_FILE } from "./Workload.js"

export interface Report {
  lost: number
  duplicateEffects: number
  transcriptViolations: number
  unsettled: number
  /** Runs of real commands counted in the workspaces (one line per run), and the most of one effect. */
  sandboxRuns: number
  maxRunsPerEffect: number
  details: Array<string>
}

const lines = (file: string): Array<any> =>
  existsSync(file)
    ? readFileSync(file, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l))
    : []

const filesUnder = (dir: string): Array<string> =>
  !existsSync(dir)
    ? []
    : readdirSync(dir).flatMap((name) => {
        const path = join(dir, name)
        return statSync(path).isDirectory() ? filesUnder(path) : [path]
      })

const asList = (body: any): Array<any> => (Array.isArray(body) ? body : (body?.effects ?? body?.items ?? []))

/** Every event of the log, through the cursor API. */
export const allEvents = async (base: string) => {
  const events: Array<any> = []
  let after = 0
  while (true) {
    const page = await json(`${base}/v1/events?after=${after}&limit=1000`)
    if (page.status !== 200) throw new Error(`GET /v1/events answered ${page.status}`)
    if (page.body.events.length === 0) return events
    events.push(...page.body.events)
    after = page.body.next
  }
}

export const unsettledCount = async (base: string) => {
  let count = 0
  for (const status of ["pending", "running"]) {
    const page = await json(`${base}/v1/effects?status=${status}&limit=1000`)
    count += asList(page.body).length
  }
  return count
}

export const check = async (
  base: string,
  dataDir: string,
  client: Client,
  threads: ReadonlyArray<string>,
  sseSeen: ReadonlyArray<number>,
  options: { readonly gapsAllowed?: boolean } = {}
): Promise<Report> => {
  const report: Report = {
    lost: 0,
    duplicateEffects: 0,
    transcriptViolations: 0,
    unsettled: 0,
    sandboxRuns: 0,
    maxRunsPerEffect: 0,
    details: []
  }

  // Nothing acknowledged is lost: each acknowledged command has its receipt, with the same answer.
  for (const [commandId, ack] of client.acked) {
    const receipt = await json(`${base}/v1/commands/${encodeURIComponent(commandId)}`)
    if (receipt.status !== 200 || (ack.status === "accepted" && receipt.body.sequence !== ack.sequence)) {
      report.lost++
      report.details.push(`lost: ${commandId} answered ${receipt.status} ${JSON.stringify(receipt.body).slice(0, 160)}`)
    }
  }
  for (const violation of client.stats.duplicateViolations) {
    report.lost++
    report.details.push(`retry applied again: ${violation}`)
  }

  // The log has no gap on SQLite; on PostgreSQL a rolled-back transaction leaves one, but sequences
  // still only ascend. Every acknowledged command's events are readable.
  const events = await allEvents(base)
  events.forEach((event, index) => {
    if (options.gapsAllowed === true) {
      if (index > 0 && event.sequence <= events[index - 1].sequence) {
        report.lost++
        report.details.push(`log out of order at ${index}: ${event.sequence} after ${events[index - 1].sequence}`)
      }
    } else if (event.sequence !== index + 1) {
      report.lost++
      report.details.push(`gap in the log at ${index + 1}: found ${event.sequence}`)
    }
  })
  // The SSE follower saw every event exactly once, in order, across reconnects.
  const expected = events.map((e) => e.sequence)
  const seenOnce = sseSeen.slice(0, expected.length)
  if (new Set(sseSeen).size !== sseSeen.length || seenOnce.some((s, i) => s !== expected[i])) {
    report.lost++
    report.details.push(
      `SSE follower saw ${sseSeen.length} events (${new Set(sseSeen).size} distinct), the log has ${expected.length}`
    )
  }

  // No process-bound effect happened twice; publish leaves one version per content.
  const world = join(dataDir, "world")
  const executions = new Map<string, number>()
  for (const entry of lines(join(world, "ledger.jsonl"))) {
    if (entry.kind === "tool.execute") executions.set(entry.effectId, (executions.get(entry.effectId) ?? 0) + 1)
  }
  for (const [effectId, count] of executions) {
    if (count > 1) {
      report.duplicateEffects++
      report.details.push(`execute ${effectId} performed ${count} times`)
    }
  }
  // Each execute's command appends its job token to its workspace when it really runs: a process-bound
  // effect (one execute per message, one token per execute) runs at most once.
  const runs = new Map<string, number>()
  for (const file of filesUnder(join(world, "workspaces")).filter((f) => f.endsWith(RUNS_FILE))) {
    for (const token of readFileSync(file, "utf8").split("\n").filter(Boolean))
      runs.set(token, (runs.get(token) ?? 0) + 1)
  }
  for (const [token, count] of runs) {
    report.sandboxRuns += count
    report.maxRunsPerEffect = Math.max(report.maxRunsPerEffect, count)
    if (count > 1) {
      report.duplicateEffects++
      report.details.push(`the command of ${token} ran ${count} times in its sandbox`)
    }
  }
  for (const file of filesUnder(join(world, "versions"))) {
    const cids = lines(file).map((l) => l.cid)
    if (cids.some((cid, i) => i > 0 && cids[i - 1] === cid)) {
      report.duplicateEffects++
      report.details.push(`publish made a second version of the same content in ${file}`)
    }
  }

  // Everything settled: no row pending or running, every turn terminal, every transcript valid.
  report.unsettled += await unsettledCount(base)
  const allThreads = [...threads, ...threads.map((t) => `${t}-helper`)]
  for (const threadId of allThreads) {
    const thread = await json(`${base}/v1/threads/${encodeURIComponent(threadId)}`)
    if (thread.status === 404) continue
    for (const turn of thread.body.turns ?? []) {
      if (!["completed", "failed", "interrupted"].includes(turn.status)) {
        report.unsettled++
        report.details.push(`turn ${turn.turnId} is ${turn.status}`)
      }
    }
    const transcript = await json(`${base}/v1/threads/${encodeURIComponent(threadId)}/transcript`)
    if (transcript.body?.valid !== true) {
      report.transcriptViolations++
      report.details.push(
        `transcript of ${threadId} invalid: ${JSON.stringify(transcript.body?.problems ?? transcript.body).slice(0, 200)}`
      )
    }
  }
  return report
}

/** Waits until nothing is pending or running and every turn has ended (bounded). */
export const quiesce = async (base: string, threads: ReadonlyArray<string>, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    let busy = await unsettledCount(base)
    if (busy === 0) {
      for (const threadId of threads) {
        const thread = await json(`${base}/v1/threads/${encodeURIComponent(threadId)}`)
        if (thread.status === 200 && thread.body.status === "running") busy++
      }
      if (busy === 0) return true
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  return false
}
