import { assert, describe, it } from "@effect/vitest"
import { capResult, type CappableResult } from "../src/McpResults.js"

const answer = (content: ReadonlyArray<unknown>, extra: Partial<CappableResult> = {}): CappableResult => ({
  server: "files",
  tool: "read",
  content,
  isError: false,
  ...extra
})

const bytesOf = (value: unknown) => Buffer.byteLength(JSON.stringify(value), "utf8")
const texts = (result: CappableResult) => result.content.map((item) => (item as { text?: string }).text)

describe("an MCP tool's answer, cut to the cap", () => {
  it("an answer within the cap is kept whole and unmarked", () => {
    const given = answer([{ type: "text", text: "small" }], { structuredContent: { n: 1 } })
    assert.strictEqual(capResult(given, 4096), given)
  })

  it("a large text is cut to the cap, keeps its start, and says how much was cut", () => {
    const text = `start ${"x".repeat(1_000_000)}`
    const capped = capResult(answer([{ type: "text", text }], { isError: true }), 4096)
    assert.isAtMost(bytesOf(capped), 4096)
    assert.isTrue(capped.isError)
    const [kept, note] = texts(capped)
    assert.isTrue(kept!.startsWith("start xxx"))
    assert.isAbove(kept!.length, 2048)
    assert.match(
      note!,
      /^\[the tool's answer of 1000\d{3} bytes was cut to the 4096-byte cap: a text item cut after \d+ of 1000006 bytes\]$/
    )
    assert.deepStrictEqual(capped.truncated, {
      bytes: bytesOf(answer([{ type: "text", text }], { isError: true })),
      keptBytes: bytesOf({ ...capped, truncated: undefined })
    })
  })

  it("an image that does not fit is left out by name, and the text after it is still kept", () => {
    const image = { type: "image", mimeType: "image/png", data: "A".repeat(200_000) }
    const capped = capResult(
      answer([image, { type: "text", text: "caption" }], { structuredContent: { big: "y".repeat(50_000) } }),
      4096
    )
    assert.isAtMost(bytesOf(capped), 4096)
    assert.deepStrictEqual(texts(capped).slice(0, 1), ["caption"])
    assert.include(texts(capped)[1]!, "an image item of 200")
    assert.include(texts(capped)[1]!, "the structured content (50010 bytes) left out")
    assert.notProperty(capped, "structuredContent")
  })

  it("text that JSON escapes (quotes, newlines, multi-byte characters) still ends within the cap, never mid-character", () => {
    const text = '"\n€😀'.repeat(100_000)
    const capped = capResult(answer([{ type: "text", text }]), 2048)
    assert.isAtMost(bytesOf(capped), 2048)
    const kept = texts(capped)[0]!
    assert.isTrue(text.startsWith(kept))
    assert.notMatch(kept, /[\ud800-\udbff]$/)
  })

  it("an answer of many small items keeps those that fit and counts the rest in one note", () => {
    const items = Array.from({ length: 50_000 }, (_, i) => ({ type: "text", text: `item ${i}` }))
    const capped = capResult(answer(items), 4096)
    assert.isAtMost(bytesOf(capped), 4096)
    const kept = texts(capped)
    assert.strictEqual(kept[0], "item 0")
    assert.isAbove(kept.length, 50)
    assert.match(
      kept.at(-1)!,
      /^\[the tool's answer of \d+ bytes was cut to the 4096-byte cap: (a text item of \d+ bytes left out; ){3}\d+ more items left out\]$/
    )
  })
})
