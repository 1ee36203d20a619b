/**
 * `pnpm chaos --fuzz`: thousands of generated bad requests against the real server. Every answer must
 * be typed JSON (`{ error, message }`), never a 5xx other than 503, never longer than a few KB (client
 * values are clipped), and nothing committed may change. Hostile probes (another spelling of a path
 * from a foreign Host or Origin, or without the JSON content type) must be refused, valid body or not.
 */
import { mkdtempSync } from "node:fs"
import { request } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Schema } from "effect"
import * as Api from "./Api.js"
import { json } from "./Client.js"
import { allEvents, quiesce } from "./Invariants.js"
import { type Random, seeded } from "./Random.js"
import { start, stop } from "./ServerProcess.js"

interface Probe {
  readonly method: string
  readonly path: string
  readonly headers?: Record<string, string>
  readonly body?: string
  /** Must be refused (4xx) even though its body is a valid command: the edge, not the command, decides. */
  readonly hostile?: boolean
}

/** The longest error body a probe may get back: the server clips what it echoes. */
const maxErrorBody = 4_096

/** Sent exactly as written: fetch would normalise the path and refuses to set Host. */
const send = (base: string, probe: Probe) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const url = new URL(base)
    const req = request(
      {
        host: url.hostname,
        port: Number(url.port),
        method: probe.method,
        path: probe.path,
        headers: probe.headers ?? {}
      },
      (response) => {
        const chunks: Array<Buffer> = []
        response.on("data", (chunk: Buffer) => chunks.push(chunk))
        response.on("end", () =>
          resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") })
        )
      }
    )
    req.setTimeout(10_000, () => req.destroy(new Error("no answer within 10 s")))
    req.on("error", reject)
    req.end(probe.body)
  })

/** Ways to spell `/v1/...` that one router reads as the same route. */
const spell = (random: Random, path: string) =>
  random.pick([
    path,
    `/${path}`,
    path.replace("/v1/", "/V1/"),
    path.replace("/v1/", "/%761/"),
    path.replace("/v1/", "/%76%31/"),
    path.replace("/v1/", "/v1//"),
    path.toUpperCase()
  ])

const foreignHosts = [
  "evil.example",
  "evil.example:80",
  "127.0.0.1.evil.example",
  "localhost.evil.example",
  "0.0.0.0",
  "[::2]"
]
const foreignOrigins = [
  "http://evil.example",
  "null",
  "http://127.0.0.1:1",
  "https://localhost",
  "file://",
  "not a url"
]

/** A valid command or operator action that must still be refused: foreign Host, foreign Origin or not JSON. */
const hostile = (random: Random, effectIds: ReadonlyArray<string>, port: string): Probe => {
  const command = JSON.stringify({
    commandId: `hostile-${random.int(0, 1e9)}`,
    type: "thread.create",
    threadId: `hostile-${random.int(0, 1e6)}`
  })
  const effectId = encodeURIComponent(effectIds.length === 0 ? "none" : random.pick(effectIds))
  const target = random.pick([
    { path: "/v1/commands", body: command as string | undefined },
    { path: `/v1/effects/${effectId}/cancel`, body: undefined },
    { path: `/v1/effects/${effectId}/retry`, body: random.pick([undefined, "{}"]) }
  ])
  const json = { "content-type": "application/json" }
  const headers = random.pick<Record<string, string>>([
    { ...json, host: random.pick(foreignHosts) },
    { ...json, host: `127.0.0.1:${port}`, origin: random.pick(foreignOrigins) },
    {},
    {
      "content-type": random.pick([
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        ""
      ])
    }
  ])
  return {
    method: "POST",
    path: spell(random, target.path),
    headers,
    ...(target.body === undefined ? {} : { body: target.body }),
    hostile: true
  }
}

/** Ids of tens of KB in paths, query strings and bodies: refused with a short answer. */
const oversized = (random: Random): Probe => {
  const id = "z".repeat(random.pick([300, 5_000, 12_000]))
  return random.pick<Probe>([
    { method: "GET", path: `/v1/effects/${id}` },
    { method: "GET", path: `/v1/commands/${id}` },
    { method: "GET", path: `/v1/threads/${id}/transcript` },
    { method: "GET", path: `/v1/effects?status=${id}&kind=${id}` },
    { method: "GET", path: `/v1/events?after=${id}` },
    {
      method: "POST",
      path: "/v1/commands",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ commandId: id.repeat(8), type: id, threadId: id })
    },
    { method: "GET", path: "/v1/events/stream", headers: { "last-event-id": id } }
  ])
}

const weirdIds = [
  "",
  " ",
  "../../etc/passwd",
  "%00",
  "a".repeat(129),
  "a".repeat(5_000),
  "😀",
  "caf\u00e9",
  "outcome:x#1",
  "reconcile:x#1",
  "a/b",
  "a?b",
  "#x y",
  "../.."
]
const values = [null, true, 42, -1, 1e308, "", "x".repeat(300), [], {}, { nested: { deep: [1, 2] } }]

const badCommand = (random: Random): Probe => {
  const kind = random.int(0, 9)
  const base = {
    commandId: `fuzz-${random.int(0, 1e9)}`,
    type: "message.send",
    threadId: "fuzz-thread",
    messageId: "m1",
    text: "hi"
  }
  let body: unknown
  switch (kind) {
    case 0:
      return {
        method: "POST",
        path: "/v1/commands",
        headers: { "content-type": "application/json" },
        body: random.pick(["{", "[1,", "nul", '{"a":}', "\u0000", "{}}"])
      }
    case 1:
      // Only ids a client may not use, so every request here must be refused.
      body = {
        ...base,
        commandId: random.pick(
          weirdIds.filter((id) => !/^[A-Za-z0-9:._\-#]{1,128}$/.test(id) || /^(outcome|reconcile):/.test(id))
        )
      }
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
      body = {
        ...base,
        [random.pick(["threadId", "messageId", "text"])]: random.pick(values.filter((v) => typeof v !== "string"))
      }
      break
    case 5:
      body = {
        ...base,
        threadId: random.pick(weirdIds.filter((id) => id !== "" && !/^[A-Za-z0-9._-]{1,128}$/.test(id)))
      }
      break
    case 6:
      body = random.pick([null, 7, "text", [base], true])
      break
    case 7:
      return {
        method: "POST",
        path: "/v1/commands",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...base, text: "x".repeat(1_100_000) })
      }
    case 8:
      return {
        method: "POST",
        path: "/v1/commands",
        headers: { "content-type": random.pick(["text/plain", "application/xml", "multipart/form-data"]) },
        body: JSON.stringify(base)
      }
    default:
      body = {
        ...base,
        extra: random.pick(values),
        type: "thread.create",
        title: random.pick(values.filter((v) => typeof v !== "string"))
      }
  }
  return {
    method: "POST",
    path: "/v1/commands",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body)
  }
}

const badRead = (random: Random): Probe => {
  const id = encodeURIComponent(random.pick(weirdIds)) || "%20"
  return random.pick<Probe>([
    { method: "GET", path: `/v1/commands/${id}` },
    { method: "GET", path: `/v1/threads/${id}` },
    { method: "GET", path: `/v1/threads/${id}/transcript` },
    { method: "GET", path: `/v1/effects/${id}` },
    { method: "POST", path: `/v1/effects/${id}/retry`, headers: { "content-type": "application/json" }, body: "{}" },
    {
      method: "POST",
      path: `/v1/effects/${id}/cancel`,
      headers: { "content-type": "application/json" },
      body: random.pick(["{", '{"commandId":""}', "[]"])
    },
    {
      method: "GET",
      path: `/v1/events?after=${random.pick(["-1", "abc", "1e99", "", "1.5"])}&limit=${random.pick(["0", "-5", "100000", "x"])}`
    },
    {
      method: "GET",
      path: `/v1/effects?status=${random.pick(["bogus", "", "RUNNING"])}&limit=${random.pick(["-1", "1e9", "many"])}`
    },
    {
      method: random.pick(["PUT", "DELETE", "PATCH"]),
      path: random.pick(["/v1/commands", "/v1/events", "/health", "/v1/threads/x"])
    },
    {
      method: "GET",
      path: random.pick(["/v2/commands", "/v1/nothing", "/v1/commands/", "/v1//threads", "/%2e%2e/etc"])
    }
  ])
}

/** A typed refusal: every error the server answers with (ApiErrors.Wire) names itself in `error` and says why in `message`. */
const isTypedError = Schema.is(Schema.Struct({ error: Schema.String, message: Schema.String }))

export const runFuzz = async (options: {
  readonly requests: number
  readonly seed: number
  readonly log: (line: string) => void
}) => {
  const random = seeded(options.seed * 7919)
  const dataDir = mkdtempSync(join(tmpdir(), "chaos-fuzz-"))
  const server = await start(dataDir)
  // Some committed state first, so "unchanged" means something.
  for (const n of [1, 2]) {
    await json(`${server.url}/v1/commands`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        commandId: `seed-${n}`,
        type: "message.send",
        threadId: "fuzz-seed",
        messageId: `m${n}`,
        text: "hello"
      })
    })
  }
  await quiesce(server.url, ["fuzz-seed"], 30_000)
  const before = JSON.stringify(await allEvents(server.url))
  const effectIds = (await Api.effects(server.url, undefined, 20)).map((e) => e.effectId)
  const port = new URL(server.url).port
  let serverErrors = 0
  let untyped = 0
  let hostileServed = 0
  let oversizedAnswers = 0
  const samples: Array<string> = []
  for (let i = 0; i < options.requests; i++) {
    const roll = random.int(0, 9)
    const probe =
      roll < 5
        ? badCommand(random)
        : roll < 7
          ? badRead(random)
          : roll < 9
            ? hostile(random, effectIds, port)
            : oversized(random)
    let status = 0
    let body: unknown
    let text = ""
    try {
      ;({ status, text } = await send(server.url, probe))
      try {
        body = text.length > 0 ? JSON.parse(text) : null
      } catch {
        body = text // swallow-ok: a non-JSON body is counted as untyped below
      }
    } catch (error) {
      serverErrors++
      samples.push(`${probe.method} ${probe.path}: ${String(error)}`)
      continue
    }
    if (status >= 500 && status !== 503) {
      serverErrors++
      samples.push(`${probe.method} ${probe.path} → ${status}`)
    }
    if (status >= 400 && !isTypedError(body)) {
      untyped++
      samples.push(
        `${probe.method} ${probe.path.slice(0, 60)} → ${status} untyped ${JSON.stringify(body).slice(0, 120)}`
      )
    }
    if (probe.hostile === true && status < 400) {
      hostileServed++
      samples.push(`hostile ${probe.method} ${probe.path.slice(0, 60)} ${JSON.stringify(probe.headers)} → ${status}`)
    }
    if (status >= 400 && text.length > maxErrorBody) {
      oversizedAnswers++
      samples.push(`${probe.method} ${probe.path.slice(0, 60)} → ${status} with a ${text.length}-character body`)
    }
    if (i % 250 === 249) options.log(`fuzz: ${i + 1}/${options.requests} requests`)
  }
  const afterEvents = await allEvents(server.url)
  const after = JSON.stringify(afterEvents)
  const stateChanged = before === after ? 0 : 1
  if (stateChanged) {
    const known = (JSON.parse(before) as Array<{ sequence: number }>).length
    for (const event of afterEvents.slice(known).slice(0, 5))
      samples.push(`new event ${event.sequence} ${event.type} from ${event.commandId}`)
  }
  await stop(server)
  for (const sample of samples.slice(0, 10)) options.log(`fuzz: problem: ${sample}`)
  return {
    ok: serverErrors === 0 && untyped === 0 && stateChanged === 0 && hostileServed === 0 && oversizedAnswers === 0,
    line:
      `fuzz: requests=${options.requests} server_errors=${serverErrors} untyped_errors=${untyped} state_changed=${stateChanged} ` +
      `hostile_served=${hostileServed} oversized_answers=${oversizedAnswers}`
  }
}
