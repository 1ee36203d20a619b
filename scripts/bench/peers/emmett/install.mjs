/**
 * Installs the Emmett peer for `pnpm bench` when it is not installed yet. It stays out of the default
 * `pnpm install` (pnpm-workspace.yaml does not list it) because its `sqlite3` driver compiles a second
 * native SQLite from source on a fresh machine, for the benchmarks alone. Run by `pnpm bench`; by hand:
 *   npx --yes pnpm@10 install --ignore-workspace --frozen-lockfile --dir scripts/bench/peers/emmett
 * If the install fails, the bench still runs and reports "Emmett could not run" with the reason.
 */
import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"

const dir = fileURLToPath(new URL(".", import.meta.url))

if (!existsSync(new URL("node_modules/@event-driven-io/emmett-sqlite", import.meta.url))) {
  process.stderr.write("bench: installing the Emmett peer (its sqlite3 driver builds native code; once per clone)\n")
  const result = spawnSync(
    "npx",
    ["--yes", "pnpm@10", "install", "--ignore-workspace", "--frozen-lockfile", "--dir", dir],
    { stdio: ["ignore", "inherit", "inherit"] }
  )
  if (result.status !== 0) {
    process.stderr.write(
      `bench: the Emmett peer did not install (exit ${result.status}); the bench reports it as not run\n`
    )
  }
}
