// The Effect language service's diagnostics over every project (tsconfig.json follows its references),
// without patching TypeScript. Errors and warnings fail the check (a warning such as multipleEffectProvide
// or globalErrorInEffectFailure names a real hazard, so none may come back); messages are suggestions,
// printed for the reader.
import { spawnSync } from "node:child_process"

const run = spawnSync("effect-language-service", ["diagnostics", "--project", "tsconfig.json"], {
  encoding: "utf8",
  env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0" },
  maxBuffer: 64 * 1024 * 1024
})
const output = `${run.stdout ?? ""}${run.stderr ?? ""}`.replace(/\x1b\[[0-9;]*m/g, "")
process.stdout.write(output)
const summary = /(\d+) errors?, (\d+) warnings?(?: and (\d+) messages?)?/.exec(output)
if (run.status !== 0 || summary === null) {
  console.error(`effect-diagnostics: the language service did not report (exit ${run.status})`)
  process.exit(1)
}
const errors = Number(summary[1])
const warnings = Number(summary[2])
console.log(`effect-diagnostics: ${errors} errors, ${warnings} warnings, ${summary[3] ?? 0} messages`)
if (errors + warnings > 0) {
  console.error("effect-diagnostics: fix the errors and warnings above (warnings fail the check too)")
  process.exit(1)
}
