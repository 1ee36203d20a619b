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

/** `count` fresh directories at once, all removed afterwards. */
export const withTempDirs = async <A>(
  label: string,
  count: number,
  use: (dirs: ReadonlyArray<string>) => Promise<A>
): Promise<A> =>
  count === 0 ? use([]) : withTempDir(label, (dir) => withTempDirs(label, count - 1, (rest) => use([dir, ...rest])))
