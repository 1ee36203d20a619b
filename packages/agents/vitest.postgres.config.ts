import { defineConfig } from "vitest/config"

// The agents conformance suite on PostgreSQL (TEST_STORE=postgres; see @orchestration/engine's
// TestStore). Crash and full-disk tests hold SQLite files by design and stay in vitest.config.ts.
process.env.TEST_STORE = "postgres"

export default defineConfig({
  test: {
    include: [
      "test/Turn.test.ts",
      "test/OpenAiTurn.test.ts",
      "test/ThreadReadModel.test.ts",
      "test/ToolFailures.test.ts",
      "test/Triggers.test.ts",
      "test/TriggersShared.test.ts",
      "test/ApprovalTurn.test.ts",
      "test/DelegateAwait.test.ts"
    ],
    globalSetup: ["test/postgres.global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    maxWorkers: 2
  }
})
