/**
 * The real server as a child process on a data directory: started with an environment (fault points,
 * floor), waited for until /health answers, killed with SIGKILL at any instant.
 */
import * as ServerChild from "@orchestration/server/testing"
import type { ChildProcess } from "node:child_process"

export interface Server {
  readonly url: string
  readonly process: ChildProcess
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  readonly output: () => string
}

export const freePort = ServerChild.freePort

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * Starts the server (apps/server's ServerChild) with this process's environment and `env` on top,
 * and resolves once /health answers with a report, or rejects if it exits first.
 */
export const start = async (dataDir: string, env: Record<string, string> = {}, timeoutMs = 30_000): Promise<Server> => {
  const port = await freePort()
  const child = ServerChild.spawnServer({
    base: "inherit",
    env: { PORT: String(port), HOST: "127.0.0.1", DATA_DIR: dataDir, LOG_LEVEL: "Warning", ...env }
  })
  const url = `http://127.0.0.1:${port}`
  await ServerChild.healthy(child, url, timeoutMs)
  return { url, process: child.child, exited: child.exited, output: child.output }
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
