/**
 * `pnpm demo`: the story the engine exists for, told by a real server on a temporary data directory.
 * A turn publishes a document and starts a long `execute`, a real command in the bubblewrap sandbox;
 * the server is killed with SIGKILL while it runs, and the command dies with it (no process is
 * left); on restart, reconcile settles the cut-off execute as "interrupted" (never run twice), the
 * model is told what to verify, the turn finishes, and the transcript is valid. Then a second turn's
 * long command is stopped by the user (turn.interrupt): the turn ends at once and its process is gone.
 * Exits non-zero if any of that does not hold.
 */
import { existsSync, mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Transcript, World } from "@orchestration/agents"
import { Api, ThreadView, TranscriptView } from "@orchestration/server"
import { Schema } from "effect"
import { type Answer, bodyAt, json } from "./Client.js"
import { quiesce } from "./Invariants.js"
import { alive, carrying, running } from "./Processes.js"
import { kill, type Server, sleep, start, stop } from "./ServerProcess.js"

const say = (line = "") => console.log(line)
/** The lines of a world file (JSON Lines), each decoded with the world's schema for it. */
const lines = <A, I>(file: string, schema: Schema.Schema<A, I>): Array<A> =>
  existsSync(file)
    ? readFileSync(file, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((line) => Schema.decodeUnknownSync(Schema.parseJson(schema))(line))
    : []
/** The turns of `GET /v1/threads/:id` (none when it did not answer 200). */
const turnsOf = (answer: Answer) => bodyAt(answer, 200, ThreadView)?.turns ?? []
const post = (base: string, body: unknown) =>
  json(`${base}/v1/commands`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body)
  })

/** Unique arguments of the demo's long commands, so the process table shows exactly theirs. */
const DEPLOY = "60.0717"
const LONG = "600.0717"

/** Processes among `pids` still alive after up to 2 s. */
const gone = async (pids: ReadonlyArray<number>) => {
  for (let i = 0; i < 40 && alive(pids).length > 0; i++) await sleep(50)
  return alive(pids)
}

/** The second chapter: a long command stopped by the user through turn.interrupt. */
const stopByUser = async (server: Server, problems: Array<string>) => {
  const script = { script: [{ toolCalls: [{ name: "execute", arguments: { command: `sleep ${LONG}` } }] }] }
  await post(server.url, {
    commandId: "demo-send-2",
    type: "message.send",
    threadId: "demo",
    messageId: "m2",
    text: JSON.stringify(script)
  })
  const deadline = Date.now() + 30_000
  while (Date.now() < deadline && running("sleep", LONG).length === 0) await sleep(20)
  const processes = carrying(LONG)
  say(
    `demo: a second turn runs \`sleep ${LONG}\` in the sandbox (${processes.length} processes); the user presses Stop`
  )
  const asked = Date.now()
  await post(server.url, { commandId: "demo-stop-2", type: "turn.interrupt", threadId: "demo", turnId: "demo:m2" })
  let status: string | undefined
  while (Date.now() < asked + 10_000) {
    status = turnsOf(await json(`${server.url}/v1/threads/demo`))[1]?.status
    if (status === "interrupted" && alive(processes).length === 0) break
    await sleep(20)
  }
  const left = alive(processes)
  say(`demo: the turn is ${status} after ${Date.now() - asked} ms; processes of the command left: ${left.length}`)
  const call = turnsOf(await json(`${server.url}/v1/threads/demo`))[1]?.toolCalls[0]
  say(`demo:   ${call?.name} (${call?.effectId}): ${call?.status} → ${String(call?.result).slice(0, 160)}`)
  if (status !== "interrupted") problems.push(`the stopped turn is ${status}, not interrupted`)
  if (left.length > 0 || processes.length === 0) problems.push("the stopped command's processes were not ended")
}

const main = async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "demo-"))
  const problems: Array<string> = []
  say(`demo: data directory ${dataDir}`)
  let server = await start(dataDir)
  say(`demo: server up at ${server.url}`)
  await post(server.url, { commandId: "demo-create", type: "thread.create", threadId: "demo", title: "Release notes" })
  const script = {
    script: [
      { toolCalls: [{ name: "publish", arguments: { path: "docs/release.md", content: "# Release 1.0\nShipped." } }] },
      {
        toolCalls: [{ name: "execute", arguments: { command: `echo deploying --prod > deploy.log; sleep ${DEPLOY}` } }]
      },
      { text: "Released: the notes are published; I checked the deploy before doing anything else." }
    ]
  }
  const sent = await post(server.url, {
    commandId: "demo-send",
    type: "message.send",
    threadId: "demo",
    messageId: "m1",
    text: JSON.stringify(script)
  })
  say(
    `demo: message accepted at sequence ${bodyAt(sent, 200, Api.DispatchAnswer)?.sequence} (the intent is durable; the work has not happened yet)`
  )

  const executeId = "tool:demo:m1:call_2_0"
  const world = join(dataDir, "world")
  const deadline = Date.now() + 30_000
  // Wait until the deploy has really started in the sandbox: its `sleep` is in the process table.
  while (Date.now() < deadline && running("sleep", DEPLOY).length === 0) await sleep(20)
  const deploying = carrying(DEPLOY)
  say(
    `demo: ${executeId} is running in the sandbox (${deploying.length} processes carry its command); the document is published`
  )
  if (deploying.length === 0) problems.push("the deploy never started in the sandbox")
  await kill(server)
  say("demo: server killed with SIGKILL in the middle of the deploy")
  const survivors = await gone(deploying)
  say(`demo: processes of the deploy still running: ${survivors.length} (the jail dies with its server)`)
  if (survivors.length > 0) problems.push(`${survivors.length} processes of the deploy outlived the server`)

  server = await start(dataDir, { LOG_LEVEL: "Info" })
  const restarted = server
  const startupLine = async () => {
    for (let i = 0; i < 100; i++) {
      const match = /reconcile settled [^)"]*/.exec(restarted.output())
      if (match !== null) return match[0]
      await sleep(20)
    }
    return undefined
  }
  const startup = await startupLine()
  say(`demo: restarted; ${startup ?? "(no reconcile line in the start-up output)"}`)
  if (startup === undefined || !/1 failed/.test(startup))
    problems.push("reconcile did not report settling the cut-off execute")
  await quiesce(server.url, ["demo"], 60_000)

  const turn = turnsOf(await json(`${server.url}/v1/threads/demo`))[0]
  say(`demo: turn ${turn?.turnId} is ${turn?.status} after ${turn?.steps} model steps`)
  for (const call of turn?.toolCalls ?? [])
    say(`demo:   ${call.name} (${call.effectId}): ${call.status} → ${String(call.result).slice(0, 140)}`)
  if (turn?.status !== "completed") problems.push(`the turn is ${turn?.status}, not completed`)
  const execute = (turn?.toolCalls ?? []).find((c) => c.name === "execute")
  if (!String(execute?.result).startsWith("interrupted: tool.execute"))
    problems.push("the cut-off execute was not answered as interrupted")

  const transcript = bodyAt(await json(`${server.url}/v1/threads/demo/transcript`), 200, TranscriptView)
  const messages = Schema.decodeUnknownSync(Transcript.Transcript)(transcript?.messages ?? [])
  say(`demo: transcript (${messages.length} messages, valid=${transcript?.valid}):`)
  for (const m of messages) {
    const text =
      "tool_calls" in m && m.tool_calls
        ? `calls ${m.tool_calls.map((c) => `${c.function.name}#${c.id}`).join(", ")}`
        : String(m.content).slice(0, 110)
    say(`demo:   ${m.role.padEnd(9)} ${text}`)
  }
  if (transcript?.valid !== true) problems.push(`the transcript is invalid: ${JSON.stringify(transcript?.problems)}`)

  const ledger = lines(join(world, "ledger.jsonl"), World.LedgerEntry)
  const executes = ledger.filter((l) => l.kind === "tool.execute")
  const versions = lines(join(world, "versions", "docs", "release.md.jsonl"), World.VersionEntry)
  say(`demo: ledger: ${ledger.map((l) => `${l.kind}#${l.attempt}`).join(", ")}`)
  say(`demo: execute performed ${executes.length} time(s); docs/release.md has ${versions.length} version(s)`)
  if (executes.length !== 1) problems.push(`execute was performed ${executes.length} times`)
  if (versions.length !== 1) problems.push(`publish left ${versions.length} versions`)
  const partly = existsSync(join(world, "workspaces", "demo", "deploy.log"))
  if (!partly) problems.push("the deploy's first line (deploy.log) is not in the workspace")
  say(
    `demo: the workspace has deploy.log: ${partly} (the command partly ran before the kill, which is why it is never repeated)`
  )

  await stopByUser(server, problems)
  const exit = await stop(server)
  if (exit.code !== 0) problems.push(`SIGTERM exit code ${exit.code}`)
  for (const problem of problems) say(`demo: PROBLEM: ${problem}`)
  say(problems.length === 0 ? "demo: ok" : "demo: FAILED")
  return problems.length === 0 ? 0 : 1
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
