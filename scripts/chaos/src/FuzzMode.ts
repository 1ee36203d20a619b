/**
 * `pnpm chaos --fuzz`: thousands of generated bad requests against the real server. Every answer must
 * be typed JSON (`{ error, message }`), never a 5xx other than 503, and nothing committed may change.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { json } from "./Client.js"
import { allEvents, quiesce } from "./Invariants.js"
import { type Random, seeded } from "./Random.js"
import { start, stop } from "./ServerProcess.js"

interface Probe {
  readonly method: string
  readonly path: string
  readonly headers?: Record<string, string>
  readonly body?: string
}

const weirdIds = ["", " ", "../../etc/passwd", "%00", "a".repeat(129), "a".repeat(5_000), "😀", "caf\u00e9", "outcome:x#1", "reconcile:x#1", "a/b", "a?b", "#x y", "../.."]
const values = [null, true, 42, -1, 1e308, "", "x".repeat(300), [], {}, { nested: { deep: [1, 2] } }]

const badCommand = (random: Random): Probe => {
  const kind = random.int(0, 9)
  const base = { commandId: `fuzz-${random.int(0, 1e9)}`, type: "message.send", threadId: "fuzz-thread", messageId: "m1", text: "hi" }
  let body: unknown
  switch (kind) {
    case 0:
      return { method: "POST", path: "/v1/commands", headers: { "content-type": "application/json" }, body: random.pick(["{", "[1,", "nul", "{\"a\":}", "\u0000", "{}}"]) }
    case 1:
      // Only ids a client may not use, so every request here must be refused.
      body = { ...base, commandId: random.pick(weirdIds.filter((id) => !/^[A-Za-z0-9:._\-#]{1,128}$/.test(id) || /^(outcome|reconcile):/.test(id))) }
      break
    case 2:
      body = { ...base, type: random.pick(["effect.succeed", "effect.fail", "engine.x", "thread.teleport", "", 7]) }
      break
    case 3: {
      const { [random.pick(["commandId", "type", "threadId", "messageId", "text"] as const)]: _drop, ...rest } = base
      body = rest
      break
    }
    case 4:
      body = { ...base, [random.pick(["threadId", "messageId", "text"])]: random.pick(values.filter((v) => typeof v !== "string")) }
      break
    case 5:
      body = { ...base, threadId: random.pick(weirdIds.filter((id) => id !== "" && !/^[A-Za-z0-9._-]{1,128}$/.test(id))) }
      break
    case 6:
      body = random.pick([null, 7, "text", [base], true])
      break
    case 7:
      return { method: "POST", path: "/v1/commands", headers: { "content-type": "application/json" }, body: JSON.stringify({ ...base, text: "x".repeat(1_100_000) }) }
    case 8:
      return { method: "POST", path: "/v1/commands", headers: { "content-type": random.pick(["text/plain", "application/xml", "multipart/form-data"]) }, body: JSON.stringify(base) }
    default:
      body = { ...base, extra: random.pick(values), type: "thread.create", title: random.pick(values.filter((v) => typeof v !== "string")) }
  }
  return { method: "POST", path: "/v1/commands", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }
}

const badRead = (random: Random): Probe => {
  const id = encodeURIComponent(random.pick(weirdIds)) || "%20"
  return random.pick<Probe>([
    { method: "GET", path: `/v1/commands/${id}` },
    { method: "GET", path: `/v1/threads/${id}` },
    { method: "GET", path: `/v1/threads/${id}/transcript` },
    { method: "GET", path: `/v1/effects/${id}` },
    { method: "POST", path: `/v1/effects/${id}/retry`, headers: { "content-type": "application/json" }, body: "{}" },
    { method: "POST", path: `/v1/effects/${id}/cancel`, headers: { "content-type": "application/json" }, body: random.pick(["{", "{\"commandId\":\"\"}", "[]"]) },
    { method: "GET", path: `/v1/events?after=${random.pick(["-1", "abc", "1e99", "", "1.5"])}&limit=${random.pick(["0", "-5", "100000", "x"])}` },
    { method: "GET", path: `/v1/effects?status=${random.pick(["bogus", "", "RUNNING"])}&limit=${random.pick(["-1", "1e9", "many"])}` },
    { method: random.pick(["PUT", "DELETE", "PATCH"]), path: random.pick(["/v1/commands", "/v1/events", "/health", "/v1/threads/x"]) },
    { method: "GET", path: random.pick(["/v2/commands", "/v1/nothing", "/v1/commands/", "/v1//threads", "/%2e%2e/etc"]) }
  ])
}

export const runFuzz = async (options: { readonly requests: number; readonly seed: number; readonly log: (line: string) => void }) => {
  const random = seeded(options.seed * 7919)
  const dataDir = mkdtempSync(join(tmpdir(), "chaos-fuzz-"))
  const server = await start(dataDir)
  // Some committed state first, so "unchanged" means something.
  for (const n of [1, 2]) {
    await json(`${server.url}/v1/commands`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ commandId: `seed-${n}`, type: "message.send", threadId: "fuzz-seed", messageId: `m${n}`, text: "hello" })
    })
  }
  await quiesce(server.url, ["fuzz-seed"], 30_000)
  const before = JSON.stringify(await allEvents(server.url))
  let serverErrors = 0
  let untyped = 0
  const samples: Array<string> = []
  for (let i = 0; i < options.requests; i++) {
    const probe = random.chance(0.6) ? badCommand(random) : badRead(random)
    let status = 0
    let body: any
    try {
      const init: RequestInit = { method: probe.method, ...(probe.headers ? { headers: probe.headers } : {}), ...(probe.body !== undefined ? { body: probe.body } : {}) }
      ;({ status, body } = await json(`${server.url}${probe.path}`, init))
    } catch (error) {
      serverErrors++
      samples.push(`${probe.method} ${probe.path}: ${String(error)}`)
      continue
    }
    if (status >= 500 && status !== 503) {
      serverErrors++
      samples.push(`${probe.method} ${probe.path} → ${status}`)
    }
    if (status >= 400 && (typeof body !== "object" || body === null || typeof body.error !== "string" || typeof body.message !== "string")) {
      untyped++
      samples.push(`${probe.method} ${probe.path.slice(0, 60)} → ${status} untyped ${JSON.stringify(body).slice(0, 120)}`)
    }
    if (i % 250 === 249) options.log(`fuzz: ${i + 1}/${options.requests} requests`)
  }
  const afterEvents = await allEvents(server.url)
  const after = JSON.stringify(afterEvents)
  const stateChanged = before === after ? 0 : 1
  if (stateChanged) {
    const known = (JSON.parse(before) as Array<{ sequence: number }>).length
    for (const event of afterEvents.slice(known).slice(0, 5)) samples.push(`new event ${event.sequence} ${event.type} from ${event.commandId}`)
  }
  await stop(server)
  for (const sample of samples.slice(0, 10)) options.log(`fuzz: problem: ${sample}`)
  return {
    ok: serverErrors === 0 && untyped === 0 && stateChanged === 0,
    line: `fuzz: requests=${options.requests} server_errors=${serverErrors} untyped_errors=${untyped} state_changed=${stateChanged}`
  }
}
