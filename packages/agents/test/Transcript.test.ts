import { assert, describe, it } from "@effect/vitest"
import { type TranscriptMessage, validateTranscript } from "../src/Transcript.js"

const user = (content: string): TranscriptMessage => ({ role: "user", content })
const text = (content: string): TranscriptMessage => ({ role: "assistant", content })
const calls = (...ids: ReadonlyArray<string>): TranscriptMessage => ({
  role: "assistant",
  content: null,
  tool_calls: ids.map((id) => ({
    id,
    type: "function",
    function: { name: "publish", arguments: `{"path":"${id}.md"}` }
  }))
})
const result = (id: string, content = `{"ok":true}`): TranscriptMessage => ({ role: "tool", tool_call_id: id, content })

const codes = (messages: ReadonlyArray<TranscriptMessage>) =>
  validateTranscript(messages).problems.map((problem) => [problem.index, problem.code, problem.callId])

describe("validateTranscript", () => {
  it("accepts a multi-step turn where every call has its one result", () => {
    const transcript = [
      user("publish two files then run the build"),
      calls("call_1_0", "call_1_1"),
      result("call_1_0"),
      result("call_1_1"),
      calls("call_2_0"),
      result("call_2_0"),
      text("done"),
      user("thanks"),
      text("you are welcome")
    ]
    assert.deepStrictEqual(validateTranscript(transcript), { valid: true, problems: [] })
  })

  it("reports a dangling call and an orphan result in one transcript, both", () => {
    // 2026-09-10: the result of call_a was never stored, the call of call_b was never stored.
    const transcript = [user("go"), calls("call_a"), result("call_b")]
    const validation = validateTranscript(transcript)
    assert.strictEqual(validation.valid, false)
    assert.deepStrictEqual(codes(transcript), [
      [1, "unanswered-call", "call_a"],
      [2, "orphan-result", "call_b"]
    ])
    const orphan = validation.problems.find((problem) => problem.code === "orphan-result")
    assert.include(orphan?.message, "No tool call found for function call output")
  })

  it("still rejects such a transcript after a repair pass answered only the dangling call", () => {
    const repaired = [user("go"), calls("call_a"), result("call_b"), result("call_a", "interrupted")]
    assert.deepStrictEqual(codes(repaired), [[2, "orphan-result", "call_b"]])
  })

  it("reports a call id used twice across the transcript", () => {
    const transcript = [
      user("one"),
      calls("call_1_0"),
      result("call_1_0"),
      text("ok"),
      user("two"),
      calls("call_1_0"),
      result("call_1_0")
    ]
    assert.deepStrictEqual(codes(transcript), [[5, "duplicate-call-id", "call_1_0"]])
  })

  it("reports a call id repeated inside one assistant message", () => {
    assert.deepStrictEqual(codes([user("x"), calls("c", "c"), result("c")]), [[1, "duplicate-call-id", "c"]])
  })

  it("reports a result that arrives after the next user message", () => {
    const transcript = [user("go"), calls("call_a"), user("hurry up"), result("call_a")]
    assert.deepStrictEqual(codes(transcript), [
      [1, "unanswered-call", "call_a"],
      [3, "result-out-of-place", "call_a"]
    ])
  })

  it("reports a call left open by the next assistant message", () => {
    const transcript = [user("go"), calls("call_a", "call_b"), result("call_a"), text("finished")]
    assert.deepStrictEqual(codes(transcript), [[1, "unanswered-call", "call_b"]])
  })

  it("reports a second result for one call", () => {
    const transcript = [user("go"), calls("call_a"), result("call_a"), result("call_a")]
    assert.deepStrictEqual(codes(transcript), [[3, "duplicate-result", "call_a"]])
  })

  it("reports a second result for a call answered in an earlier step", () => {
    const transcript = [
      user("go"),
      calls("call_a"),
      result("call_a"),
      calls("call_b"),
      result("call_b"),
      result("call_a")
    ]
    assert.deepStrictEqual(codes(transcript), [[5, "duplicate-result", "call_a"]])
  })

  it("reports an orphan result at the very start of a transcript", () => {
    const validation = validateTranscript([result("ghost"), user("hi")])
    assert.deepStrictEqual(validation.problems, [
      {
        index: 0,
        code: "orphan-result",
        callId: "ghost",
        message: "No tool call found for function call output with call_id ghost"
      }
    ])
  })

  it("reports trailing open calls unless a turn in progress is being checked", () => {
    const inProgress = [user("go"), calls("call_a", "call_b"), result("call_a")]
    assert.deepStrictEqual(codes(inProgress), [[1, "unanswered-call", "call_b"]])
    assert.deepStrictEqual(validateTranscript(inProgress, { allowTrailingOpenCalls: true }), {
      valid: true,
      problems: []
    })
  })

  it("reports arguments that are not JSON and an empty tool_calls list", () => {
    const transcript: ReadonlyArray<TranscriptMessage> = [
      user("go"),
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "execute", arguments: "{not json" } }]
      },
      result("c1"),
      { role: "assistant", content: "nothing to do", tool_calls: [] }
    ]
    assert.deepStrictEqual(codes(transcript), [
      [1, "invalid-arguments", "c1"],
      [3, "empty-tool-calls", undefined]
    ])
  })

  it("accepts an empty transcript and one without tools", () => {
    assert.isTrue(validateTranscript([]).valid)
    assert.isTrue(validateTranscript([user("hi"), text("echo: hi")]).valid)
  })
})
