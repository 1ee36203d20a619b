/**
 * Helpers for tests that need real processes: crash tests run an engine in a child process, kill it
 * with SIGKILL (or let a fault point do it) and read what it printed. Shared by every package's tests.
 */
import { spawn } from "node:child_process"
import { Effect } from "effect"

export interface ChildRun {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs `node <script> ...args` to its end (or its SIGKILL), with extra environment variables. */
export const runChild = (script: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.async<ChildRun>((resume) => {
    const child = spawn(process.execPath, [script, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...env }
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()))
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()))
    child.on("close", (code, signal) => resume(Effect.succeed({ code, signal, stdout, stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** The JSON objects a child printed, one per line. */
export const jsonLines = (stdout: string): Array<Record<string, any>> =>
  stdout
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line))
export * as TestStore from "./TestStore.js"
export { mulberry32 } from "../SeededRandom.js"
