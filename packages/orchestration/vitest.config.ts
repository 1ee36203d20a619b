import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Crash tests start real child processes; two cores are shared with them.
    fileParallelism: true,
    maxWorkers: 2
  }
})
