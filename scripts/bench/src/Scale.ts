/**
 * Scale of state: does dispatch slow down, or memory grow, with history? A store is bulk-loaded with
 * `rows` settled commands (event, receipt, succeeded outbox row, read-model row: what the engine
 * leaves behind; see BulkLoad.ts), and then a fresh child process opens it with the engine and measures dispatch at 16 clients and its resident memory.
 * Every size is loaded first and then measured in interleaved rounds (main.ts): one short run per size
 * gave ratios from 0.54 to 1.5 between runs on this shared machine, as a neighbour's fsync burst fell
 * on one size or another.
 */
import { bulkLoad, createSchema } from "./BulkLoad.js"
import { runJsonChild } from "./JsonChild.js"

export interface ScaleResult {
  readonly rows: number
  readonly perSecond: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly rssMb: number
}

/** Creates the engine's schema in `dir` and bulk-loads `rows` settled commands. */
export const loadScaleStore = async (dir: string, rows: number) => {
  await createSchema(dir)
  if (rows > 0) bulkLoad(dir, rows, { outboxStatus: "succeeded" })
}

/**
 * One measurement over a loaded store, in a fresh process so the resident memory is the engine's over
 * this store and nothing else's. `label` prefixes the command ids: every round over one store needs new
 * ones, or it would measure stored answers instead of writes.
 */
export const measureScale = (dir: string, rows: number, ops: number, label: string): ScaleResult => ({
  rows,
  ...runJsonChild<Omit<ScaleResult, "rows">>("ScaleChild.js", [dir, String(ops), label])
})
