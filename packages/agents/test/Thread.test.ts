/** The Thread decider, given events, when an outcome arrives, then events and effects: pure, no store. */
import { assert, describe, it } from "@effect/vitest"
import type { DecideContext, EffectOutcome } from "@orchestration/engine"
import { Thread, type ThreadEvent, type ThreadState } from "../src/Thread.js"

const ctx: DecideContext = { commandId: "cmd", aggregateId: "t1", now: 0, deriveId: (key) => `cmd:${key}` }
const given = (events: ReadonlyArray<ThreadEvent>): ThreadState => events.reduce(Thread.evolve, Thread.initialState)

const stepAnswered = (step: number, ids: ReadonlyArray<string>): EffectOutcome => ({
  effectId: `step:t1:m1#${step}`,
  kind: "model.step",
  payload: { threadId: "t1", turnId: "t1:m1", step },
  attempt: 1,
  status: "succeeded",
  response: {
    text: "",
    toolCalls: ids.map((id, index) => ({
      id,
      name: "publish",
      arguments: { path: `${step}-${index}.md`, content: "x" }
    }))
  },
  by: "reactor"
})

const started: ThreadEvent = { type: "turn.started", turnId: "t1:m1", ordinal: 1, messageId: "m1", text: "go" }

const decided = (state: ThreadState, outcome: EffectOutcome) => {
  const decision = Thread.onOutcome!(state, outcome, ctx)
  if (decision._tag === "Rejection") throw new Error(decision.message)
  return decision
}

describe("the Thread decider: tool-call ids a provider reuses", () => {
  it("given a running turn, when a step answers two calls with one id, then each call gets its own transcript id and effect", () => {
    const decision = decided(given([{ type: "thread.created", title: null }, started]), stepAnswered(1, ["dup", "dup"]))
    const responded = decision.events[0] as Extract<ThreadEvent, { type: "model.responded" }>
    assert.deepStrictEqual(
      responded.toolCalls.map((c) => [c.callId, c.transcriptId, c.effectId]),
      [
        ["dup", "dup", "tool:t1:m1:dup"],
        ["dup", "dup_t1", "tool:t1:m1:dup_t1"]
      ]
    )
    assert.deepStrictEqual(
      decision.effects.map((e) => e.id),
      ["tool:t1:m1:dup", "tool:t1:m1:dup_t1"]
    )
  })

  it("given one of two same-id calls answered, when the other is answered, then the next step starts (answers are per call, not per provider id)", () => {
    const first = decided(given([{ type: "thread.created", title: null }, started]), stepAnswered(1, ["dup", "dup"]))
    const afterResponse = given([{ type: "thread.created", title: null }, started, ...first.events])
    const toolDone = (effectId: string): EffectOutcome => ({
      effectId,
      kind: "tool.publish",
      payload: { threadId: "t1", turnId: "t1:m1" },
      attempt: 1,
      status: "succeeded",
      response: { ok: true },
      by: "reactor"
    })
    const one = decided(afterResponse, toolDone("tool:t1:m1:dup"))
    assert.deepStrictEqual(one.effects, [])
    const afterOne = [...one.events].reduce(Thread.evolve, afterResponse)
    const two = decided(afterOne, toolDone("tool:t1:m1:dup_t1"))
    assert.deepStrictEqual(
      two.effects.map((e) => e.id),
      ["step:t1:m1#2"]
    )
    // A later step reusing the id again gets a third one.
    const afterTwo = [...two.events].reduce(Thread.evolve, afterOne)
    const third = decided(afterTwo, stepAnswered(2, ["dup"]))
    assert.deepStrictEqual(
      third.effects.map((e) => e.id),
      ["tool:t1:m1:dup_t1_2"]
    )
  })
})
