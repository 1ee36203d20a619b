import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Reduction from "../src/Reduction.js"
import { shrink } from "../src/Shrink.js"
import { cleanup, runSeed, seedPlans } from "../src/Simulation.js"
import type { ClientPlan } from "../src/Workload.js"

const script = JSON.stringify({
  script: [
    { toolCalls: [{ name: "execute", arguments: { command: "make a" } }] },
    {
      toolCalls: [
        { name: "publish", arguments: { path: "docs/x.md", content: "v1" } },
        { name: "execute", arguments: { command: "make b" } }
      ]
    },
    { text: "finished 2" }
  ]
})

/** One thread: a message sent, retried, retried with an edit, interrupted; then a second message. */
const plans: ReadonlyArray<ClientPlan> = [
  {
    threadId: "th0",
    actions: [
      { pauseMs: 10, action: { type: "send", threadId: "th0", messageId: "m0", text: script } },
      { pauseMs: 20, action: { type: "duplicate", threadId: "th0", messageId: "m0", text: script } },
      { pauseMs: 30, action: { type: "conflict", threadId: "th0", messageId: "m0", text: `${script} (edited)` } },
      { pauseMs: 40, action: { type: "interrupt", threadId: "th0", messageId: "m0" } },
      { pauseMs: 50, action: { type: "send", threadId: "th0", messageId: "m1", text: script } }
    ]
  }
]

const kinds = (reduced: ReadonlyArray<ClientPlan>) =>
  (reduced[0]?.actions ?? []).map(({ action }) =>
    action.type === "burst"
      ? `burst:${action.sends.map((send) => `${send.threadId}/${send.messageId}`).join(",")}`
      : `${action.type}:${action.messageId}`
  )
const textOf = (reduced: ReadonlyArray<ClientPlan>, index: number) => {
  const action = reduced[0]!.actions[index]!.action
  return "text" in action ? action.text : ""
}

describe("a reduction of a seed's plans (Reduction.applyTo)", () => {
  it("given no reduction, when applied, then the plans are the seed's", () => {
    assert.strictEqual(Reduction.applyTo(plans, Reduction.none), plans)
  })

  it("given a dropped interrupt, when applied, then only it is gone and the rest keep their pauses", () => {
    const reduced = Reduction.applyTo(plans, { dropActions: [Reduction.actionKey("th0", 3)] })
    assert.deepStrictEqual(kinds(reduced), ["send:m0", "duplicate:m0", "conflict:m0", "send:m1"])
    assert.deepStrictEqual(
      reduced[0]!.actions.map((s) => s.pauseMs),
      [10, 20, 30, 50]
    )
  })

  it("given a dropped send, when applied, then its retries go with it (they would be first sends) and its interrupt stays", () => {
    const reduced = Reduction.applyTo(plans, { dropActions: [Reduction.actionKey("th0", 0)] })
    assert.deepStrictEqual(kinds(reduced), ["interrupt:m0", "send:m1"])
  })

  it("given a dropped tool call, when applied, then the send, its duplicate and its conflict lose it alike", () => {
    const reduced = Reduction.applyTo(plans, { dropCalls: [Reduction.callKey("th0", "m0", 1, 1)] })
    const expected = JSON.stringify({
      script: [
        { toolCalls: [{ name: "execute", arguments: { command: "make a" } }] },
        { toolCalls: [{ name: "publish", arguments: { path: "docs/x.md", content: "v1" } }] },
        { text: "finished 2" }
      ]
    })
    assert.strictEqual(textOf(reduced, 0), expected)
    assert.strictEqual(textOf(reduced, 1), expected)
    assert.strictEqual(textOf(reduced, 2), `${expected} (edited)`)
    // Another message's calls are its own.
    assert.strictEqual(textOf(reduced, 4), script)
  })

  it("given one send of a burst dropped, when applied, then the burst goes on with the others; all dropped, it is gone", () => {
    const burst = {
      threadId: "th0",
      actions: [
        {
          pauseMs: 5,
          action: {
            type: "burst" as const,
            sends: [0, 1, 2].map((k) => ({
              type: "send" as const,
              threadId: `th${k}`,
              messageId: `burst${k}`,
              text: `burst ${k}`
            }))
          }
        }
      ]
    }
    const one = Reduction.applyTo([burst], { dropActions: [Reduction.burstSendKey("th0", 0, 1)] })
    assert.deepStrictEqual(kinds(one), ["burst:th0/burst0,th2/burst2"])
    const all = [0, 1, 2].map((k) => Reduction.burstSendKey("th0", 0, k))
    assert.deepStrictEqual(kinds(Reduction.applyTo([burst], { dropActions: all })), [])
  })

  it("given every call of a step dropped, when applied, then the step is gone and the closing text stays", () => {
    const reduced = Reduction.applyTo(plans, { dropCalls: [Reduction.callKey("th0", "m0", 0, 0)] })
    const steps = (JSON.parse(textOf(reduced, 0)) as { script: ReadonlyArray<unknown> }).script
    assert.strictEqual(steps.length, 2)
    assert.deepStrictEqual(steps[1], { text: "finished 2" })
    assert.deepStrictEqual(Reduction.callsOf(textOf(reduced, 0)), [
      [0, 0],
      [0, 1]
    ])
  })
})

describe("shrinking a failing seed", () => {
  afterAll(cleanup)

  // A check the real engine fails at once: any `execute` performed. Seed 7's clients send many
  // messages over three threads, and some scripts call `execute`.
  const probe = (world: { readonly performances: ReadonlyArray<{ readonly kind: string }> }) =>
    world.performances.some((p) => p.kind === "tool.execute") ? "an execute was performed" : undefined

  it("finds a smaller case that fails the same way and replays exactly; without the probe the case passes", () => {
    const result = shrink(7, { probe })
    assert.isDefined(result)
    const { original, shrunk, reduction } = result!
    assert.strictEqual(original.failure?.invariant, "probe")
    assert.strictEqual(shrunk.failure?.invariant, "probe")
    // Of the seed's actions one message is left, with one tool call: the execute.
    const kept = Reduction.applyTo(seedPlans(7), reduction).flatMap((plan) => plan.actions)
    const seedActions = seedPlans(7).flatMap((plan) => plan.actions)
    assert.isAbove(seedActions.length, 5)
    assert.strictEqual(kept.length, 1)
    const sent = kept[0]!.action
    assert.strictEqual(sent.type, "send")
    assert.deepStrictEqual(Reduction.callsOf("text" in sent ? sent.text : "").length, 1)
    assert.isTrue(reduction.noFaults)
    assert.isTrue(reduction.noOutages)
    // The seed and the reduction replay the shrunk history exactly.
    assert.strictEqual(runSeed(7, { probe, reduction }).digest, shrunk.digest)
    // What is left out never makes a failure by itself: the reduced run of the real engine passes.
    assert.isUndefined(runSeed(7, { reduction }).failure)
  })

  it("answers nothing for a seed that does not fail", () => {
    assert.isUndefined(shrink(21, { maxTries: 5 }))
  })
})
