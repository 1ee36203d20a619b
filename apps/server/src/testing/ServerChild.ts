/**
 * The server as a real child process, for every test and script that needs one (the server's own
 * process tests, the dashboard's browser tests, the chaos harness): one way to start it, to learn
 * its URL, and to stop or kill it. Plain promises, so scripts use it without an Effect runtime.
 * The process runs the build (`tsc --build` runs before tests and scripts).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createServer } from "node:net"
import { fileURLToPath } from "node:url"

/**
 * The real main, built: the server over the agents domain. This module runs from dist (scripts, other
 * packages) or from src (the server's own tests under vitest); either way the child runs dist.
 */
export const serverMain = fileURLToPath(
  new URL(import.meta.url.includes("/dist/src/") ? "../main.js" : "../../dist/src/main.js", import.meta.url)
)

export interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

export interface ServerChild {
  readonly child: ChildProcess
  /** Complete stdout lines so far (the JSON log lines). */
  readonly stdout: Array<string>
  /** stderr chunks so far. */
  readonly stderr: Array<string>
  readonly exited: Promise<Exit>
  /** stdout and stderr as one text, the last 20,000 characters (for failure messages). */
  readonly output: () => string
}

export interface SpawnOptions {
  /** The script to run; default `serverMain`. */
  readonly script?: string
  /** Variables on top of the base environment. */
  readonly env?: Readonly<Record<string, string>>
  /** `clean` (default): only PATH from this process, so the caller's shell cannot leak in; `inherit`: all of it. */
  readonly base?: "clean" | "inherit"
}

export const spawnServer = (options: SpawnOptions = {}): ServerChild => {
  const base = options.base === "inherit" ? process.env : { PATH: process.env.PATH ?? "" }
  const child = spawn(process.execPath, [options.script ?? serverMain], {
    env: { ...base, ...options.env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const stdout: Array<string> = []
  const stderr: Array<string> = []
  let output = ""
  let partial = ""
  const record = (chunk: string) => {
    output = (output + chunk).slice(-20_000)
  }
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    record(chunk)
    const lines = (partial + chunk).split("\n")
    partial = lines.pop() ?? ""
    stdout.push(...lines.filter((line) => line !== ""))
  })
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    record(chunk)
    stderr.push(chunk)
  })
  const exited = new Promise<Exit>((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })))
  return { child, stdout, stderr, exited, output: () => output }
}

const running = (server: ServerChild) => server.child.exitCode === null && server.child.signalCode === null

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** The server's URL from its start-up line ("serving …", info level); rejects if it exits or takes too long. */
export const servingUrl = async (server: ServerChild, timeoutMs = 20_000): Promise<string> => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const line = server.stdout.find((l) => l.includes('"message":"serving '))
    if (line !== undefined) return JSON.parse(line).annotations.url as string
    if (!running(server)) throw new Error(`server exited before serving: ${server.output()}`)
    await sleep(25)
  }
  throw new Error(`server did not start within ${timeoutMs} ms: ${server.output()}`)
}

/**
 * Resolves once `url`/health answers with a report (200, or 503 unavailable: not `starting`, which
 * the server answers from the moment it listens until it is ready); for servers started with a quiet
 * LOG_LEVEL, which print no start-up line. Rejects if the process exits first, and kills it on timeout.
 */
export const healthy = async (server: ServerChild, url: string, timeoutMs = 30_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (!running(server)) throw new Error(`server exited while starting:\n${server.output()}`)
    try {
      const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2_000) })
      const body = await response.text()
      if ((response.status === 200 || response.status === 503) && !body.includes('"status":"starting"')) return
    } catch {
      // swallow-ok: not listening yet; the loop retries until the deadline
    }
    await sleep(25)
  }
  server.child.kill("SIGKILL")
  throw new Error(`server did not answer /health within ${timeoutMs} ms:\n${server.output()}`)
}

/** A port free at the moment of asking, for a server that must be told its port up front. */
export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const probe = createServer()
    probe.once("error", reject)
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address()
      probe.close(() =>
        typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port"))
      )
    })
  })

/** SIGKILL and wait until the process is gone (the kernel then releases its store lock). */
export const kill = async (server: ServerChild): Promise<Exit> => {
  if (running(server)) server.child.kill("SIGKILL")
  return server.exited
}

/** SIGTERM, the graceful path (then SIGKILL after `killAfterMs`, when given). Resolves with the exit. */
export const stop = async (server: ServerChild, killAfterMs?: number): Promise<Exit> => {
  if (running(server)) server.child.kill("SIGTERM")
  const killer = killAfterMs === undefined ? undefined : setTimeout(() => server.child.kill("SIGKILL"), killAfterMs)
  const exit = await server.exited
  clearTimeout(killer)
  return exit
}
