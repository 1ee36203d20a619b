import { assert, describe, it } from "vitest"
import { applyLive, keptPartials, type LiveAttempt, type LiveMessage } from "../src/liveText.js"

const delta = (attempt: number, offset: number, text: string, step = 1): LiveMessage => ({
  kind: "delta",
  data: { turnId: "t:m", step, attempt, offset, text }
})
const fold = (messages: ReadonlyArray<LiveMessage>, from: ReadonlyArray<LiveAttempt> = []) =>
  messages.reduce(applyLive, from)

describe("the thread view's live text", () => {
  it("an attempt grows with its deltas; a repeated delta adds nothing; the recorded answer takes it off", () => {
    const growing = fold([delta(1, 0, "Hel"), delta(1, 3, "lo"), delta(1, 3, "lo")])
    assert.deepStrictEqual(growing, [{ turnId: "t:m", step: 1, attempt: 1, text: "Hello", status: "streaming" }])
    const answered = applyLive(growing, {
      kind: "thread-event",
      data: { type: "turn.completed", payload: { turnId: "t:m", steps: 1, text: "Hello" } }
    })
    assert.deepStrictEqual(answered, [])
  })

  it("superseded and interrupted text stays, marked, and is not removed by the step's answer", () => {
    const after = fold([
      delta(1, 0, "Partial"),
      { kind: "superseded", data: { turnId: "t:m", step: 1, attempt: 1, length: 7 } },
      delta(2, 0, "Final"),
      { kind: "thread-event", data: { type: "turn.completed", payload: { turnId: "t:m", steps: 1, text: "Final" } } },
      delta(1, 0, "Half", 2),
      { kind: "interrupted", data: { turnId: "t:m", step: 2, attempt: 1, length: 4, reason: "stop" } }
    ])
    assert.deepStrictEqual(
      after.map((a) => [a.step, a.attempt, a.text, a.status, a.reason]),
      [
        [1, 1, "Partial", "superseded", undefined],
        [2, 1, "Half", "interrupted", "stop"]
      ]
    )
  })

  it(`keeps only the newest ${keptPartials} partial attempts`, () => {
    const messages: Array<LiveMessage> = []
    for (let attempt = 1; attempt <= keptPartials + 5; attempt++) {
      messages.push(delta(attempt, 0, `a${attempt}`))
      messages.push({ kind: "superseded", data: { turnId: "t:m", step: 1, attempt, length: 2 } })
    }
    const kept = fold(messages)
    assert.strictEqual(kept.length, keptPartials)
    assert.strictEqual(kept[0]!.attempt, 6)
  })

  it("a tool call's arguments grow beside the text; a repeated piece adds nothing; an unknown event changes nothing", () => {
    const tool = (offset: number, text: string, toolCallId = "call_a"): LiveMessage => ({
      kind: "tool-delta",
      data: { turnId: "t:m", step: 1, attempt: 1, toolCallId, offset, text }
    })
    const shown = fold([
      tool(0, '{"pa'),
      delta(1, 0, "Hi"),
      tool(4, 'th":1}'),
      tool(4, 'th":1}'),
      tool(0, "{}", "call_b")
    ])
    assert.deepStrictEqual(shown, [
      {
        turnId: "t:m",
        step: 1,
        attempt: 1,
        text: "Hi",
        status: "streaming",
        toolCalls: [
          { id: "call_a", args: '{"path":1}' },
          { id: "call_b", args: "{}" }
        ]
      }
    ])
    assert.strictEqual(applyLive(shown, { kind: "something-new", data: {} } as unknown as LiveMessage), shown)
  })
})
