/** Scripted turns a chaos run sends: publish, execute (some long), delegate, across many threads. */
import type { Command } from "./Client.js"
import type { Random } from "./Random.js"

export const threadIds = (count: number) => Array.from({ length: count }, (_, i) => `chaos-${i}`)

/** The workspace file each execute's run appends its job token to. */
export const RUNS_FILE = ".chaos-runs"

/**
 * The token of one message's execute (one execute per message, so one per effect). `marker` is the
 * chaos run's own, so a process table scan finds this run's sandbox processes and nobody else's.
 */
export const jobToken = (marker: string, threadId: string, n: number) => `job-${marker}-${threadId}-${n}`

/** The n-th message of a thread: a turn that publishes, executes and sometimes delegates, then ends. */
export const message = (random: Random, threadId: string, n: number, marker = "chaos"): Command => {
  const steps: Array<unknown> = [
    {
      toolCalls: [
        { name: "publish", arguments: { path: `docs/${threadId}/${n % 3}.md`, content: `content ${n % 2}` } },
        {
          name: "execute",
          arguments: {
            // A real command in the sandbox: its run leaves one line in the thread's workspace, so runs
            // can be counted per effect; the sleep makes kills land while it runs.
            command: `echo ${jobToken(marker, threadId, n)} >> ${RUNS_FILE}${random.chance(0.5) ? `; sleep ${(random.int(200, 1_200) / 1_000).toFixed(1)}` : ""}`
          }
        }
      ]
    }
  ]
  if (random.chance(0.4)) {
    steps.push({
      toolCalls: [{ name: "delegate", arguments: { threadId: `${threadId}-helper`, text: `help with ${n}` } }]
    })
  }
  // The answer streams in a few deltas (model.step records each through StreamIngest), so kills,
  // random or at the stream.after-flush fault point, land mid-stream.
  steps.push({ chunks: ["finished", " ", `${n}`], chunkDelayMs: random.int(20, 120) })
  return {
    commandId: `chaos-send-${threadId}-${n}`,
    type: "message.send",
    threadId,
    messageId: `m${n}`,
    text: JSON.stringify({ script: steps })
  }
}
