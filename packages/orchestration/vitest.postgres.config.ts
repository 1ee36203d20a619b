import { defineConfig } from "vitest/config"

// The conformance suite on PostgreSQL: the engine and reactor tests that run against any store, with
// TEST_STORE=postgres (see src/testing/TestStore.ts). Crash tests that kill a SQLite holder and the
// file-lock and SQLITE_FULL tests are SQLite's own and stay in vitest.config.ts.
process.env.TEST_STORE = "postgres"

export default defineConfig({
  test: {
    include: [
      "test/receipts.test.ts",
      "test/follow.test.ts",
      "test/reactor.test.ts",
      "test/reactor-leases.test.ts",
      "test/reactor-outage.test.ts",
      "test/validation-lifecycle.test.ts",
      "test/schema-evolution.test.ts",
      "test/operator-floor.test.ts",
      "test/operator-actions.test.ts",
      "test/cancel-watch.test.ts",
      "test/restart-replay.test.ts",
      "test/optimistic-batches.test.ts",
      "test/reconcile-storage.test.ts",
      "test/settlement-page.test.ts",
      "test/projection-constraints.test.ts",
      "test/quarantine.test.ts",
      "test/table-columns.test.ts",
      "test/audit.test.ts",
      "test/commit-writers.test.ts",
      "test/deferred-runs.test.ts",
      "test/claim-next-due.test.ts",
      "test/commit-claims.test.ts",
      "test/timers.test.ts",
      "test/stream-ingest.test.ts",
      "test/stream-channels.test.ts",
      "test/postgres/**/*.test.ts"
    ],
    globalSetup: ["test/postgres.global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    maxWorkers: 2
  }
})
