/**
 * `pnpm chaos --disk-full`: the data directory on a small tmpfs, filled for real while turns run.
 * The command whose write failed must get a visible 503; a turn whose outcome could not be recorded
 * must end failed with `storage: …` once space returns; nothing acknowledged may be lost; and after
 * space is freed, new turns complete without a restart.
 */
import { spawnSync } from "node:child_process"
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Api, ApiErrors, ThreadView, TranscriptView } from "@orchestration/server"
import { type Answer, bodyAs, bodyAt, json, makeClient } from "./Client.js"
import { quiesce } from "./Invariants.js"
import { sleep, start, stop } from "./ServerProcess.js"

const post = (base: string, body: unknown) =>
  json(`${base}/v1/commands`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body)
  })

/** The turns of a thread read with `GET /v1/threads/:id` (none when it did not answer 200). */
const turnsOf = (answer: Answer) => bodyAt(answer, 200, ThreadView)?.turns ?? []
/** A 200 transcript that is not valid. */
const invalidTranscript = (answer: Answer) => bodyAt(answer, 200, TranscriptView)?.valid === false
const storageRefusal = (answer: Answer) =>
  answer.status === 503 ? bodyAs(answer, ApiErrors.Wire.StorageUnavailable) : undefined

/** Writes zeros until the file system says ENOSPC. */
const fill = (file: string) => {
  const fd = openSync(file, "w")
  const chunk = Buffer.alloc(256 * 1024)
  try {
    while (true) writeSync(fd, chunk)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error
  } finally {
    closeSync(fd)
  }
}

/**
 * The I/O-error mode: the store refuses the Nth event write with SQLITE_IOERR (a fault layer from
 * STORAGE_FAULTS). Whatever that write belonged to must fail visibly: a client command with a 503,
 * an effect's outcome as a failed turn with reason `storage: …`. Retrying the command then works.
 */
const ioErrors = async (log: (line: string) => void) => {
  const counts = { ackedLost: 0, silentFailures: 0, stuck: 0, transcriptViolations: 0, recovered: true }
  const dataDir = mkdtempSync(join(tmpdir(), "chaos-ioerr-"))
  const server = await start(dataDir, {
    STORAGE_FAULTS: "events:nth=5:code=SQLITE_IOERR_WRITE,events:nth=9:code=SQLITE_IOERR_FSYNC"
  })
  const threads = ["io-a", "io-b", "io-c", "io-d"]
  const acked = new Map<string, unknown>()
  try {
    const script = JSON.stringify({
      script: [{ toolCalls: [{ name: "publish", arguments: { path: "io.md", content: "io" } }] }, { text: "ok" }]
    })
    for (const threadId of threads) {
      const command = { commandId: `io-${threadId}`, type: "message.send", threadId, messageId: "m1", text: script }
      for (let attempt = 0; attempt < 5; attempt++) {
        const answer = await post(server.url, command)
        const accepted = bodyAt(answer, 200, Api.DispatchAnswer)
        if (accepted !== undefined) {
          acked.set(command.commandId, accepted.sequence)
          break
        }
        const refusal = storageRefusal(answer)
        if (refusal === undefined) {
          counts.silentFailures++
          log(`io-error: ${command.commandId} answered ${answer.status} ${JSON.stringify(answer.body).slice(0, 160)}`)
          break
        }
        log(`io-error: ${command.commandId} refused visibly (503 ${refusal.reason}); retrying with the same id`)
      }
    }
    if (!(await quiesce(server.url, threads, 60_000))) counts.stuck++
    for (const threadId of threads) {
      for (const turn of turnsOf(await json(`${server.url}/v1/threads/${threadId}`))) {
        if (!["completed", "failed", "interrupted"].includes(turn.status)) counts.stuck++
        if (turn.status === "failed" && !String(turn.reason).startsWith("storage"))
          log(`io-error: ${threadId} failed for another reason: ${turn.reason}`)
      }
      if (invalidTranscript(await json(`${server.url}/v1/threads/${threadId}/transcript`)))
        counts.transcriptViolations++
    }
    for (const [commandId, sequence] of acked) {
      const receipt = bodyAt(
        await json(`${server.url}/v1/commands/${encodeURIComponent(commandId)}`),
        200,
        Api.ReceiptView
      )
      if (receipt === undefined || receipt.sequence !== sequence) counts.ackedLost++
    }
    counts.recovered = acked.size === threads.length
  } finally {
    await stop(server)
  }
  return counts
}

export const runDiskFull = async (options: {
  readonly seed: number
  readonly allowSkip: boolean
  readonly log: (line: string) => void
}) => {
  const io = await ioErrors(options.log)
  const mountPoint = mkdtempSync(join(tmpdir(), "chaos-disk-"))
  const mounted = spawnSync("mount", ["-t", "tmpfs", "-o", "size=48m", "tmpfs", mountPoint], { encoding: "utf8" })
  if (mounted.status !== 0) {
    const why = (mounted.stderr || mounted.error?.message || "mount failed").trim()
    return {
      ok: options.allowSkip,
      line: `disk-full: skipped (cannot mount a tmpfs: ${why})${options.allowSkip ? "" : "; use --allow-skip to accept"}`
    }
  }
  const dataDir = join(mountPoint, "data")
  mkdirSync(dataDir)
  const filler = join(mountPoint, "filler")
  let silentFailures = 0
  let ackedLost = 0
  let stuck = 0
  let transcriptViolations = 0
  let recovered = false
  const client = makeClient()
  const server = await start(dataDir, { DISK_FLOOR_BYTES: String(4 * 1024 * 1024) })
  try {
    // A turn that is running when the disk fills: its execute finishes while nothing can be written.
    const longTurn = {
      commandId: "disk-long",
      type: "message.send",
      threadId: "disk-a",
      messageId: "m1",
      text: JSON.stringify({
        script: [
          {
            toolCalls: [{ name: "execute", arguments: { command: "sleep 1.5; head -c 20000 /dev/zero | tr '\\0' x" } }]
          },
          { text: "never" }
        ]
      })
    }
    client.submit(longTurn)
    await client.flush(server.url)
    await sleep(300)
    options.log("disk-full: filling the volume")
    fill(filler)

    // New work is refused visibly, and /health says so.
    const refused = await post(server.url, {
      commandId: "disk-new",
      type: "message.send",
      threadId: "disk-b",
      messageId: "m1",
      text: "hello"
    })
    const admitted = bodyAt(refused, 200, Api.DispatchAnswer)
    if (admitted !== undefined) client.acked.set("disk-new", { sequence: admitted.sequence, status: "accepted" })
    else if (storageRefusal(refused) === undefined) {
      silentFailures++
      options.log(
        `disk-full: new work while full answered ${refused.status} ${JSON.stringify(refused.body).slice(0, 200)}`
      )
    }
    const health = await json(`${server.url}/health`)
    if (health.status !== 503 || bodyAs(health, Api.HealthReport)?.status !== "unavailable") {
      silentFailures++
      options.log(
        `disk-full: /health while full answered ${health.status} ${JSON.stringify(health.body).slice(0, 200)}`
      )
    }
    // The long execute finishes in this window; its outcome cannot be written yet.
    await sleep(2_500)
    const during = turnsOf(await json(`${server.url}/v1/threads/disk-a`))
    if (during[0]?.status === "completed") {
      silentFailures++
      options.log("disk-full: a turn completed while its result could not be recorded")
    }

    options.log("disk-full: freeing space")
    rmSync(filler)
    await quiesce(server.url, ["disk-a", "disk-b"], 60_000)
    const turn = turnsOf(await json(`${server.url}/v1/threads/disk-a`))[0]
    if (turn === undefined || !["failed", "completed", "interrupted"].includes(turn.status)) {
      stuck++
      options.log(`disk-full: the long turn is ${JSON.stringify(turn)}`)
    } else if (turn.status === "failed" && !String(turn.reason).startsWith("storage")) {
      options.log(`disk-full: the long turn failed for another reason: ${turn.reason}`)
    }
    for (const threadId of ["disk-a", "disk-b"]) {
      if (invalidTranscript(await json(`${server.url}/v1/threads/${threadId}/transcript`))) transcriptViolations++
    }
    for (const [commandId] of client.acked) {
      const receipt = await json(`${server.url}/v1/commands/${encodeURIComponent(commandId)}`)
      if (receipt.status !== 200) ackedLost++
    }
    // Space is back: new work is admitted and completes, without a restart.
    const after = await post(server.url, {
      commandId: "disk-after",
      type: "message.send",
      threadId: "disk-c",
      messageId: "m1",
      text: "back?"
    })
    if (after.status === 200) {
      recovered = await quiesce(server.url, ["disk-c"], 30_000)
      recovered &&= turnsOf(await json(`${server.url}/v1/threads/disk-c`))[0]?.status === "completed"
    } else {
      options.log(
        `disk-full: after freeing space, new work answered ${after.status} ${JSON.stringify(after.body).slice(0, 200)}`
      )
    }
  } finally {
    await stop(server)
    spawnSync("umount", [mountPoint])
  }
  ackedLost += io.ackedLost
  silentFailures += io.silentFailures
  stuck += io.stuck
  transcriptViolations += io.transcriptViolations
  recovered &&= io.recovered
  const ok = ackedLost === 0 && silentFailures === 0 && stuck === 0 && transcriptViolations === 0 && recovered
  return {
    ok,
    line: `disk-full: acked_lost=${ackedLost} silent_failures=${silentFailures} stuck_turns=${stuck} transcript_violations=${transcriptViolations} recovered=${recovered ? "yes" : "no"}`
  }
}
