// The PostgreSQL run's database: created before the test files run, dropped after.
import { TestStore } from "@orchestration/engine/testing"

export default TestStore.globalSetup
