/**
 * The real server as a child process on a data directory: started with an environment (fault points,
 * floor), waited for until /health answers, killed with SIGKILL at any instant.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createServer } from "node:net"
import { fileURLToPath } from "node:url"

const serverMain = fileURLToPath(new URL("../../../../apps/server/dist/src/main.js", import.meta.url))

export interface Server {
  readonly url: string
  readonly process: ChildProcess
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  readonly output: () => string
}

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

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * Starts the server and resolves once /health answers with a report (200, or 503 unavailable: not
 * `starting`, which the server answers from the moment it listens until it is ready), or rejects if
 * it exits first.
 */
export const start = async (dataDir: string, env: Record<string, string> = {}, timeoutMs = 30_000): Promise<Server> => {
  const port = await freePort()
  const child = spawn(process.execPath, [serverMain], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", DATA_DIR: dataDir, LOG_LEVEL: "Warning", ...env }
  })
  let output = ""
  child.stdout!.on("data", (c: Buffer) => (output = (output + c.toString()).slice(-20_000)))
  child.stderr!.on("data", (c: Buffer) => (output = (output + c.toString()).slice(-20_000)))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal }))
  )
  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + timeoutMs
  let gone = false
  void exited.then(() => (gone = true))
  while (Date.now() < deadline) {
    if (gone) throw new Error(`server exited while starting:\n${output}`)
    try {
      const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2_000) })
      const body = await response.text()
      const starting = body.includes('"status":"starting"')
      if ((response.status === 200 || response.status === 503) && !starting)
        return { url, process: child, exited, output: () => output }
    } catch {
      // swallow-ok: not listening yet; the loop retries until the deadline
    }
    await sleep(25)
  }
  child.kill("SIGKILL")
  throw new Error(`server did not answer /health within ${timeoutMs} ms:\n${output}`)
}

/** SIGKILL and wait until the process is gone (the kernel then releases its store lock). */
export const kill = async (server: Server) => {
  if (server.process.exitCode === null && server.process.signalCode === null) server.process.kill("SIGKILL")
  await server.exited
}

/** SIGTERM: the graceful path. Resolves with the exit code. */
export const stop = async (server: Server) => {
  if (server.process.exitCode === null && server.process.signalCode === null) server.process.kill("SIGTERM")
  return server.exited
}
