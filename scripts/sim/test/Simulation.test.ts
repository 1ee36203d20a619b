import { afterAll, assert, describe, it } from "@effect/vitest"
import { cleanup, runSeed } from "../src/Simulation.js"

describe("the deterministic simulator", () => {
  afterAll(cleanup)

  it("two runs of one seed produce the same trace digest", () => {
    const first = runSeed(7)
    const second = runSeed(7)
    assert.isUndefined(first.failure, JSON.stringify(first.failure))
    assert.strictEqual(second.digest, first.digest)
    assert.strictEqual(second.steps, first.steps)
  })

  it("different seeds take different histories", () => {
    assert.notStrictEqual(runSeed(8).digest, runSeed(9).digest)
  })

  it("a seed that crashes and refuses writes still ends with every invariant holding", () => {
    const results = [1, 2, 3, 4, 5, 6].map((seed) => runSeed(seed))
    for (const result of results) assert.isUndefined(result.failure, JSON.stringify(result.failure))
    assert.isAbove(
      results.reduce((n, r) => n + r.crashes, 0),
      0
    )
    assert.isAbove(
      results.reduce((n, r) => n + r.faults, 0),
      0
    )
  })
})
