import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Process tests start real servers as child processes; keep the machine's two cores for them.
    fileParallelism: true,
    maxWorkers: 2
  }
})
