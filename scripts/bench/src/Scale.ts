/**
 * Scale of state: does dispatch slow down, or memory grow, with history? A store is bulk-loaded with
 * `rows` settled commands (event, receipt, succeeded outbox row, read-model row: what the engine
 * leaves behind; see BulkLoad.ts), and then a fresh child process opens it with the engine and measures dispatch at 16 clients and its resident memory.
 */
import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { bulkLoad, createSchema } from "./BulkLoad.js"

export interface ScaleResult {
  readonly rows: number
  readonly perSecond: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly rssMb: number
}

export const runScale = async (dir: string, rows: number, ops: number): Promise<ScaleResult> => {
  await createSchema(dir)
  if (rows > 0) bulkLoad(dir, rows, { outboxStatus: "succeeded" })
  const child = fileURLToPath(new URL("./ScaleChild.js", import.meta.url))
  // A fresh process, so the resident memory is the engine's over this store and nothing else's.
  const output = execFileSync(process.execPath, [child, dir, String(ops)], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"]
  })
  const measured = JSON.parse(output.trim().split("\n").pop() ?? "{}") as Omit<ScaleResult, "rows">
  return { rows, ...measured }
}
