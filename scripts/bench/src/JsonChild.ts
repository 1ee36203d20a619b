/**
 * A measurement in a fresh process: `node <script> <args…>` from this directory, whose last stdout line
 * is its JSON result (ScaleChild.ts, RecoveryChild.ts). Its stderr goes to ours, so its progress shows.
 */
import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"

export const runJsonChild = <A>(script: string, args: ReadonlyArray<string>): A => {
  const child = fileURLToPath(new URL(`./${script}`, import.meta.url))
  const output = execFileSync(process.execPath, [child, ...args], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"]
  })
  return JSON.parse(output.trim().split("\n").pop() ?? "{}") as A
}
