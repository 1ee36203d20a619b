/** Scripted turns a chaos run sends: publish, execute (some long), delegate, across many threads. */
import type { Command } from "./Client.js"
import type { Random } from "./Random.js"

export const threadIds = (count: number) => Array.from({ length: count }, (_, i) => `chaos-${i}`)

/** The n-th message of a thread: a turn that publishes, executes and sometimes delegates, then ends. */
export const message = (random: Random, threadId: string, n: number): Command => {
  const steps: Array<unknown> = [
    {
      toolCalls: [
        { name: "publish", arguments: { path: `docs/${threadId}/${n % 3}.md`, content: `content ${n % 2}` } },
        {
          name: "execute",
          arguments: {
            command: `echo job-${threadId}-${n}${random.chance(0.3) ? `; sleep ${(random.int(200, 1_200) / 1_000).toFixed(1)}` : ""}`
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
  steps.push({ text: `finished ${n}` })
  return {
    commandId: `chaos-send-${threadId}-${n}`,
    type: "message.send",
    threadId,
    messageId: `m${n}`,
    text: JSON.stringify({ script: steps })
  }
}
