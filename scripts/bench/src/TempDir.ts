/** A fresh temporary data directory per measurement, removed afterwards, so no run sees another's rows. */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

export const withTempDir = async <A>(label: string, use: (dir: string) => Promise<A>): Promise<A> => {
  const dir = mkdtempSync(join(process.env.BENCH_TMPDIR ?? tmpdir(), `bench-${label}-`))
  try {
    return await use(dir)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
