import { defineConfig } from "vitest/config"

// The conformance suite over @effect/sql-sqlite-node's stock SqlClient (TEST_STORE=sqlite-node, see
// src/testing/TestStore.ts): an application that hands the engine its own SqliteClient layer gets the
// same guarantees as one on the engine's default client.
process.env.TEST_STORE = "sqlite-node"

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
      "test/restart-replay.test.ts",
      "test/optimistic-batches.test.ts",
      "test/reconcile-storage.test.ts",
      "test/projection-constraints.test.ts",
      "test/quarantine.test.ts",
      "test/stream-ingest.test.ts"
    ],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    maxWorkers: 2
  }
})
