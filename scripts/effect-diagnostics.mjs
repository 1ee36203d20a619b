// The Effect language service's diagnostics over every project (tsconfig.json follows its references),
// without patching TypeScript. Errors fail the check; warnings and messages are printed for the reader.
import { spawnSync } from "node:child_process"

const run = spawnSync("effect-language-service", ["diagnostics", "--project", "tsconfig.json"], {
  encoding: "utf8",
  env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0" },
  maxBuffer: 64 * 1024 * 1024
})
const output = `${run.stdout ?? ""}${run.stderr ?? ""}`.replace(/\x1b\[[0-9;]*m/g, "")
process.stdout.write(output)
const summary = /(\d+) errors?, (\d+) warnings?/.exec(output)
if (run.status !== 0 || summary === null) {
  console.error(`effect-diagnostics: the language service did not report (exit ${run.status})`)
  process.exit(1)
}
const errors = Number(summary[1])
console.log(`effect-diagnostics: ${errors} errors, ${summary[2]} warnings`)
process.exit(errors > 0 ? 1 : 0)
