/**
 * The chaos stream judge on hand-made histories: a reader's messages and the store's chunks, each
 * shaped as the server sends and stores them, with one defect planted per test. A judge that misses
 * a kind of defect would let `pnpm chaos` pass a run that has it, so each counter is pinned here.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Thread } from "@orchestration/agents"
import { judge, type SseMessage, type StoredChunk, type StreamVerdict } from "../src/ThreadStreamFollower.js"

const threadId = "chaos-0"
const turnId = "turn-1"
const effectId = `step:${turnId}#1`

const event = (sequence: number, payload: Thread.ThreadEvent): SseMessage => ({
  id: String(sequence),
  event: "thread-event",
  data: {
    sequence,
    eventId: `event-${sequence}`,
    aggregateType: "thread",
    aggregateId: threadId,
    version: sequence,
    type: payload.type,
    payload,
    commandId: `command-${sequence}`,
    occurredAt: 1_700_000_000_000 + sequence
  }
})

const started = (sequence: number, turn = turnId) =>
  event(sequence, { type: "turn.started", turnId: turn, ordinal: 1, messageId: "m0", text: "go" })

const responded = (
  sequence: number,
  text: string,
  toolCalls: ReadonlyArray<{ readonly callId: string; readonly arguments: unknown }> = [],
  turn = turnId
) =>
  event(sequence, {
    type: "model.responded",
    turnId: turn,
    step: 1,
    text,
    toolCalls: toolCalls.map((c) => ({
      callId: c.callId,
      transcriptId: c.callId,
      effectId: `tool:${turn}:${c.callId}`,
      name: "publish",
      arguments: c.arguments
    }))
  })

/** A text delta of step 1 of the turn; the id is the position the server would give it. */
const delta = (attempt: number, offset: number, text: string, turn = turnId): SseMessage => ({
  id: `1:1:${attempt}:${offset + text.length}:${turn}`,
  event: "delta",
  data: { turnId: turn, step: 1, attempt, offset, text }
})

const toolDelta = (attempt: number, toolCallId: string, offset: number, text: string): SseMessage => ({
  id: `1:1:${attempt}:${offset + text.length}:${turnId}`,
  event: "tool-delta",
  data: { turnId, step: 1, attempt, toolCallId, offset, text }
})

const superseded = (attempt: number, length: number): SseMessage => ({
  id: `1:1:${attempt + 1}:0:${turnId}`,
  event: "superseded",
  data: { turnId, step: 1, attempt, length }
})

const chunk = (attempt: number, start: number, text: string, channel = "", effect = effectId): StoredChunk => ({
  effectId: effect,
  attempt,
  start,
  end: start + text.length,
  channel,
  text
})

/** The verdict's counters alone, so one assertion shows every counter that moved. */
const counters = (v: StreamVerdict) => ({
  deltas: v.deltas,
  dups: v.dups,
  gaps: v.gaps,
  unmarked: v.unmarked,
  answerMismatches: v.answerMismatches,
  storeDuplicates: v.storeDuplicates,
  storeMismatches: v.storeMismatches,
  superseded: v.superseded
})

const clean = {
  deltas: 0,
  dups: 0,
  gaps: 0,
  unmarked: 0,
  answerMismatches: 0,
  storeDuplicates: 0,
  storeMismatches: 0,
  superseded: 0
}

const verdict = (messages: ReadonlyArray<SseMessage>, stored: ReadonlyArray<StoredChunk>) =>
  judge([{ threadId, messages }], stored)

describe("the chaos stream judge", () => {
  it("a clean history (every delta once, the answer as streamed, the store as read) counts nothing", () => {
    const v = verdict(
      [started(1), delta(1, 0, "fin"), delta(1, 3, "ished"), responded(2, "finished")],
      [chunk(1, 0, "fin"), chunk(1, 3, "ished")]
    )
    assert.deepStrictEqual(counters(v), { ...clean, deltas: 2 })
    assert.deepStrictEqual(v.details, [])
  })

  it("a delta sent again at an offset the reader already has is a dup", () => {
    const v = verdict(
      [started(1), delta(1, 0, "fin"), delta(1, 0, "fin"), delta(1, 3, "ished"), responded(2, "finished")],
      []
    )
    assert.deepStrictEqual(counters(v), { ...clean, deltas: 3, dups: 1 })
  })

  it("a thread event delivered twice (a resume that went back) is a dup", () => {
    const v = verdict([started(1), delta(1, 0, "finished"), responded(2, "finished"), responded(2, "finished")], [])
    assert.strictEqual(v.dups, 1)
    assert.strictEqual(v.gaps, 0)
  })

  it("a delta past the end of what the reader has (a lost range) is a gap", () => {
    const v = verdict([started(1), delta(1, 0, "fin"), delta(1, 5, "hed")], [])
    assert.deepStrictEqual(counters(v), { ...clean, deltas: 2, gaps: 1 })
  })

  it("a dead attempt's text with no superseded notice before the next attempt is unmarked", () => {
    const unmarked = verdict([started(1), delta(1, 0, "fin"), delta(2, 0, "finished"), responded(2, "finished")], [])
    assert.deepStrictEqual(counters(unmarked), { ...clean, deltas: 2, unmarked: 1 })
    const marked = verdict(
      [started(1), delta(1, 0, "fin"), superseded(1, 3), delta(2, 0, "finished"), responded(2, "finished")],
      []
    )
    assert.deepStrictEqual(counters(marked), { ...clean, deltas: 2, superseded: 1 })
  })

  it("the answer is compared with the step's last attempt: the recorded text differing from it is a mismatch", () => {
    // The dead attempt streamed "finished" too; only the last one ("finish") is the answer's stream.
    const v = verdict(
      [started(1), delta(1, 0, "finished"), superseded(1, 8), delta(2, 0, "finish"), responded(2, "finished")],
      []
    )
    assert.deepStrictEqual(counters(v), { ...clean, deltas: 2, superseded: 1, answerMismatches: 1 })
  })

  it("tool-call arguments streamed other than the call recorded are a mismatch; equal JSON is not", () => {
    const args = { path: "docs/a.md", content: "x" }
    const streamed = JSON.stringify(args)
    const same = verdict(
      [
        started(1),
        toolDelta(1, "call-1", 0, streamed.slice(0, 7)),
        toolDelta(1, "call-1", 7, streamed.slice(7)),
        responded(2, "", [{ callId: "call-1", arguments: args }])
      ],
      [chunk(1, 0, streamed.slice(0, 7), "tool:call-1"), chunk(1, 7, streamed.slice(7), "tool:call-1")]
    )
    assert.deepStrictEqual(counters(same), { ...clean, deltas: 2 })
    const other = verdict(
      [started(1), toolDelta(1, "call-1", 0, streamed), responded(2, "", [{ callId: "call-1", arguments: { x: 1 } }])],
      []
    )
    assert.strictEqual(other.answerMismatches, 1)
    // Arguments that never streamed are no JSON at all: a mismatch, not a crash of the judge.
    const none = verdict([started(1), responded(2, "", [{ callId: "call-1", arguments: args }])], [])
    assert.strictEqual(none.answerMismatches, 1)
  })

  it("stored chunks of one attempt that overlap or leave a hole are counted; another attempt's from 0 are not", () => {
    const messages = [started(1), delta(1, 0, "fin"), delta(1, 3, "ished"), responded(2, "finished")]
    const overlap = verdict(messages, [chunk(1, 0, "fin"), chunk(1, 0, "fin"), chunk(1, 3, "ished")])
    assert.strictEqual(overlap.storeDuplicates, 1)
    const hole = verdict(messages, [chunk(1, 0, "fin"), chunk(1, 4, "shed")])
    assert.strictEqual(hole.storeDuplicates, 1)
    const twoAttempts = verdict(
      [started(1), delta(1, 0, "fin"), superseded(1, 3), delta(2, 0, "finished"), responded(2, "finished")],
      [chunk(1, 0, "fin"), chunk(2, 0, "finished")]
    )
    assert.deepStrictEqual(counters(twoAttempts), { ...clean, deltas: 2, superseded: 1 })
  })

  it("an attempt whose stored text differs from what the reader got is a store/reader mismatch", () => {
    const v = verdict(
      [started(1), delta(1, 0, "fin"), delta(1, 3, "ished"), responded(2, "finished")],
      [chunk(1, 0, "fin"), chunk(1, 3, "ishes")]
    )
    assert.deepStrictEqual(counters(v), { ...clean, deltas: 2, storeMismatches: 1 })
    // Stored text the reader never got (it stopped before the attempt's deltas) is a mismatch too.
    const unread = verdict([started(1)], [chunk(1, 0, "fin")])
    assert.strictEqual(unread.storeMismatches, 1)
  })

  it("stored chunks of a turn no reader followed are checked for overlaps but not compared with a reader", () => {
    const other = "step:turn-9#1"
    const v = verdict(
      [started(1), delta(1, 0, "finished"), responded(2, "finished")],
      [chunk(1, 0, "finished"), chunk(1, 0, "elsewhere", "", other), chunk(1, 0, "elsewhere", "", other)]
    )
    assert.deepStrictEqual(counters(v), { ...clean, deltas: 1, storeDuplicates: 1 })
  })
})
