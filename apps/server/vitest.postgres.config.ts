import { defineConfig } from "vitest/config"

// Several real server processes on one PostgreSQL database (TEST_STORE=postgres; see
// @orchestration/engine's TestStore for the run's database).
process.env.TEST_STORE = "postgres"

export default defineConfig({
  test: {
    include: ["test/postgres/**/*.test.ts"],
    globalSetup: ["test/postgres.global-setup.ts"],
    testTimeout: 150_000,
    hookTimeout: 60_000,
    maxWorkers: 1
  }
})
