// The conformance run's PostgreSQL database: created before the test files run, dropped after.
import { globalSetup } from "../src/testing/TestStore.js"

export default globalSetup
