import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The browser tests start a real server and Chromium: generous, bounded.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // One browser at a time on a two-core machine.
    fileParallelism: false
  }
})
