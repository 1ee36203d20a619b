/**
 * The admission rule of the engine's lifecycle alone: given a phase and how the engine was told to
 * treat clients before activation, when a command arrives from an origin, then it is admitted or
 * refused with a typed reason.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Origin } from "../src/CommandId.js"
import * as Lifecycle from "../src/Lifecycle.js"

const given = (phase: Lifecycle.Phase, beforeActivation: Lifecycle.BeforeActivation = "wait") => ({
  when: (origin: Origin) => ({
    thenAdmitted: () => assert.isUndefined(Lifecycle.admission(phase, origin, beforeActivation)),
    thenRefused: (reason: "not-activated" | "shutting-down") =>
      assert.strictEqual(Lifecycle.admission(phase, origin, beforeActivation)?.reason, reason)
  })
})

describe("admission by lifecycle phase", () => {
  it("an open engine admits clients and the engine's own commands", () => {
    given("open").when("client").thenAdmitted()
    given("open").when("internal").thenAdmitted()
  })

  it("a parked engine queues a client's command until activation, or refuses it when told to fail", () => {
    given("parked", "wait").when("client").thenAdmitted()
    given("parked", "fail").when("client").thenRefused("not-activated")
  })

  it("a parked engine admits the engine's own commands (boot reconcile) either way", () => {
    given("parked", "wait").when("internal").thenAdmitted()
    given("parked", "fail").when("internal").thenAdmitted()
  })

  it("a draining engine refuses clients but lets settlements of running work through", () => {
    given("draining").when("client").thenRefused("shutting-down")
    given("draining").when("internal").thenAdmitted()
  })

  it("a closed engine refuses everyone", () => {
    given("closed").when("client").thenRefused("shutting-down")
    given("closed").when("internal").thenRefused("shutting-down")
  })
})
