/** The page's pure parts: age and rate formatting, the stuck rule, the chart window, SSE parsing. */
import { assert, describe, it } from "vitest"
import { parseSse } from "../src/eventStream.js"
import {
  approvalArguments,
  errorReason,
  formatAge,
  formatRate,
  isStuck,
  quarantineReason,
  unreadableMessagesNote
} from "../src/format.js"
import { addSample, rateSeries, type Sample } from "../src/samples.js"

const sample = (at: number, head: number, settled = 0): Sample => ({ at, head, settled, lag: 0, oldestPendingAgeMs: 0 })

describe("formatting", () => {
  it("ages read in the largest two units, and clock skew never shows a negative age", () => {
    assert.deepStrictEqual([-5, 850, 12_000, 184_000, 7_500_000, 100_000_000].map(formatAge), [
      "0ms",
      "850ms",
      "12s",
      "3m 04s",
      "2h 05m",
      "1d 3h"
    ])
  })

  it("rates keep two digits below 1/s and none above 10/s", () => {
    assert.deepStrictEqual([0, 0.345, 4.25, 120.4].map(formatRate), ["0", "0.34", "4.3", "120"])
  })

  it("an effect's reason is its message with its code, whatever shape the error has", () => {
    assert.strictEqual(
      errorReason({ message: "EISDIR: illegal operation", code: "EISDIR" }),
      "EISDIR: illegal operation [EISDIR]"
    )
    assert.strictEqual(errorReason({ message: "cancelled by an operator" }), "cancelled by an operator")
    assert.strictEqual(errorReason("plain"), "plain")
    assert.strictEqual(errorReason(null), undefined)
  })

  it("a quarantined effect reads as its closed reason, who found it, and a bounded message", () => {
    const quarantine = { reason: "aggregate-unavailable", by: "reconcile", message: "event 3 cannot be decoded", at: 0 }
    assert.strictEqual(
      quarantineReason({ quarantine }),
      "aggregate-unavailable (found by reconcile): event 3 cannot be decoded"
    )
    assert.isAtMost(quarantineReason({ quarantine: { ...quarantine, message: "x".repeat(5_000) } }).length, 400)
    assert.strictEqual(quarantineReason({ quarantine: null }), "quarantined (no reason stored)")
    assert.strictEqual(
      quarantineReason({
        quarantine: null,
        quarantineUnreadable: "its stored quarantine record is not JSON (cut off)"
      }),
      "record unreadable: its stored quarantine record is not JSON (cut off)"
    )
  })
})

describe("damaged rows of a thread", () => {
  it("an approval whose arguments could not be read shows why; readable arguments show as JSON", () => {
    assert.strictEqual(approvalArguments({ arguments: { x: 1 } }), '{\n  "x": 1\n}')
    assert.strictEqual(
      approvalArguments({ arguments: null, undecodable: "its stored argument text is not JSON (cut off)" }),
      "arguments unreadable: its stored argument text is not JSON (cut off)"
    )
  })

  it("unreadable transcript messages are named by position, with why; none, no note", () => {
    assert.strictEqual(unreadableMessagesNote(undefined), undefined)
    assert.strictEqual(
      unreadableMessagesNote([{ position: 2, why: "its stored message is not JSON (cut off)" }]),
      "1 message cannot be read and is not shown: message 2: its stored message is not JSON (cut off)"
    )
  })
})

describe("the stuck rule", () => {
  it("flags only a running turn whose thread has been silent longer than the limit", () => {
    assert.isTrue(isStuck("running", 1_000, 62_000, 60_000))
    assert.isFalse(isStuck("running", 1_000, 61_000, 60_000))
    assert.isFalse(isStuck("completed", 0, 1_000_000, 60_000))
    assert.isFalse(isStuck(undefined, 0, 1_000_000, 60_000))
  })
})

describe("the rolling window", () => {
  it("keeps the last window of readings and ignores one that is not newer", () => {
    let samples: ReadonlyArray<Sample> = []
    for (const at of [0, 2_000, 4_000, 6_000]) samples = addSample(samples, sample(at, at / 1000), 4_000)
    assert.deepStrictEqual(
      samples.map((s) => s.at),
      [2_000, 4_000, 6_000]
    )
    assert.strictEqual(addSample(samples, sample(6_000, 99), 4_000), samples)
  })

  it("rates are per second between readings, and a counter that drops (retention) reads as 0", () => {
    const rates = rateSeries([sample(0, 10), sample(2_000, 30), sample(4_000, 25)], (s) => s.head)
    assert.deepStrictEqual(rates, [
      { at: 2_000, value: 10 },
      { at: 4_000, value: 0 }
    ])
  })
})

describe("server-sent events", () => {
  it("splits complete messages from the unfinished rest and skips comments", () => {
    const text =
      ': connected\n\nid: 7\nevent: turn.started\ndata: {"sequence":7}\n\n: keep-alive\n\nid: 8\nevent: tool.res'
    const { messages, rest } = parseSse(text)
    assert.deepStrictEqual(messages, [{ id: "7", event: "turn.started", data: '{"sequence":7}' }])
    assert.strictEqual(rest, "id: 8\nevent: tool.res")
    const next = parseSse(`${rest}ult\ndata: {"sequence":8}\n\n`)
    assert.deepStrictEqual(next.messages, [{ id: "8", event: "tool.result", data: '{"sequence":8}' }])
  })
})
