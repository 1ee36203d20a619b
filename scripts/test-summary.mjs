// Prints one closing line for CI over every package's vitest JSON report: "tests: N passed, N failed".
import { existsSync, readFileSync, readdirSync } from "node:fs"
import { join } from "node:path"

let passed = 0
let failed = 0
let skipped = 0
const missing = []
for (const group of ["packages", "apps"]) {
  if (!existsSync(group)) continue
  for (const name of readdirSync(group)) {
    const dir = join(group, name)
    if (!existsSync(join(dir, "package.json"))) continue
    const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"))
    if (manifest.scripts?.test === undefined) continue
    const report = join(dir, "test-results", "vitest.json")
    if (!existsSync(report)) {
      missing.push(dir)
      continue
    }
    const json = JSON.parse(readFileSync(report, "utf8"))
    passed += json.numPassedTests
    failed += json.numFailedTests
    skipped += json.numPendingTests + json.numTodoTests
    console.log(`${dir}: ${json.numPassedTests} passed, ${json.numFailedTests} failed`)
  }
}
if (missing.length > 0) console.log(`no test report from: ${missing.join(", ")}`)
console.log(`tests: ${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ""}`)
process.exit(failed > 0 || missing.length > 0 || passed === 0 ? 1 : 0)
