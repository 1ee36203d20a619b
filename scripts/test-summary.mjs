// Prints one closing line for CI over every package's vitest JSON report: "tests: N passed, N failed".
import { existsSync, readFileSync, readdirSync } from "node:fs"
import { join } from "node:path"

let passed = 0
let failed = 0
let skipped = 0
const missing = []
for (const group of ["packages", "apps", "scripts"]) {
  if (!existsSync(group)) continue
  for (const name of readdirSync(group)) {
    const dir = join(group, name)
    if (!existsSync(join(dir, "package.json"))) continue
    const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"))
    if (manifest.scripts?.test === undefined) continue
    const results = join(dir, "test-results")
    if (!existsSync(join(results, "vitest.json"))) {
      missing.push(dir)
      continue
    }
    // vitest.json (the default run) and any further runs of the package (vitest.postgres.json: the
    // conformance suite on PostgreSQL; others as packages add them).
    for (const file of readdirSync(results)
      .filter((f) => /^vitest.*\.json$/.test(f))
      .sort()) {
      const json = JSON.parse(readFileSync(join(results, file), "utf8"))
      passed += json.numPassedTests
      failed += json.numFailedTests
      skipped += json.numPendingTests + json.numTodoTests
      console.log(`${dir} (${file}): ${json.numPassedTests} passed, ${json.numFailedTests} failed`)
    }
  }
}
if (missing.length > 0) console.log(`no test report from: ${missing.join(", ")}`)
console.log(`tests: ${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ""}`)
process.exit(failed > 0 || missing.length > 0 || passed === 0 ? 1 : 0)
