import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // test/postgres/** needs the PostgreSQL run (vitest.postgres.config.ts).
    exclude: ["test/postgres/**", "**/node_modules/**"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Process tests start real servers as child processes; keep the machine's two cores for them.
    fileParallelism: true,
    maxWorkers: 2
  }
})
