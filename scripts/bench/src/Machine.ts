/** What the numbers were measured on: they mean little without the machine, the versions and the date. */
import Database from "better-sqlite3"
import { execFileSync } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { availableParallelism, tmpdir } from "node:os"

// dist/src/Machine.js → the bench package's own node_modules, or the Emmett peer's (peers/emmett).
const versionOf = (name: string, root = "../../") => {
  const file = new URL(`${root}node_modules/${name}/package.json`, import.meta.url)
  return existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version : "not installed"
}

const packages = [
  "effect",
  "@effect/sql",
  "@effect/sql-sqlite-node",
  "better-sqlite3",
  "@effect/cluster",
  "@effect/workflow"
]
const emmettPackages = ["@event-driven-io/emmett", "@event-driven-io/emmett-sqlite"]

export interface Machine {
  readonly date: string
  readonly cpus: number
  readonly memory: string
  readonly node: string
  readonly sqlite: string
  readonly dataDir: string
  readonly versions: ReadonlyArray<readonly [string, string]>
}

export const describeMachine = (): Machine => {
  const db = new Database(":memory:")
  const sqlite = (db.prepare("SELECT sqlite_version() AS v").get() as { v: string }).v
  db.close()
  const free =
    execFileSync("free", ["-m"], { encoding: "utf8" })
      .split("\n")
      .find((line) => line.startsWith("Mem:")) ?? "free: n/a"
  return {
    date: new Date().toISOString(),
    cpus: availableParallelism(),
    memory: free.replace(/\s+/g, " ").trim(),
    node: process.version,
    sqlite,
    dataDir: process.env.BENCH_TMPDIR ?? tmpdir(),
    versions: [
      ...packages.map((name) => [name, versionOf(name)] as const),
      ...emmettPackages.map((name) => [name, versionOf(name, "../../peers/emmett/")] as const)
    ]
  }
}
