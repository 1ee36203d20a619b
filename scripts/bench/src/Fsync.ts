/** The physical limit: how many small write + fdatasync pairs the data directory's disk completes per second. */
import { closeSync, fdatasyncSync, openSync, writeSync } from "node:fs"
import { join } from "node:path"
import { nowMs, type RunResult } from "./Stats.js"

export const runFsync = (dir: string, ops: number): RunResult => {
  const fd = openSync(join(dir, "fsync.bin"), "w")
  try {
    // One page, rewritten at a moving offset like a WAL append.
    const page = Buffer.alloc(4096, 7)
    const latencies: Array<number> = []
    const start = nowMs()
    for (let i = 0; i < ops; i++) {
      const t0 = nowMs()
      writeSync(fd, page, 0, page.length, (i % 256) * page.length)
      fdatasyncSync(fd)
      latencies.push(nowMs() - t0)
    }
    return { ops, seconds: (nowMs() - start) / 1000, latenciesMs: latencies }
  } finally {
    closeSync(fd)
  }
}
