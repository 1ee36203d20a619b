import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Every CLI call is a node process (about a second to start on a busy two-core machine).
    testTimeout: 120_000,
    hookTimeout: 180_000,
    // The tests start real servers and the CLI as child processes; keep the machine's two cores for them.
    fileParallelism: true,
    maxWorkers: 2
  }
})
