/**
 * How much of an MCP tool's answer is kept. A server may answer anything (a whole file, a page of
 * search results, a screenshot in base64); the answer is stored twice (the row's response and the
 * thread's event) and sent to the model again at every later step of the turn, so one large answer
 * would make every later step slow and costly, or too large for the model to take at all. An answer
 * over the cap is cut, as `execute` keeps only the tail of its output: text items are kept in order
 * until the budget is spent (the last one cut), other items (images, audio, resources) that do not
 * fit are replaced by a line naming what was left out, structured content that does not fit is
 * dropped, and a last text item says that and how much was cut, so the model knows it read a part.
 * Pure; the cap is counted in bytes of the answer's JSON, as it is stored.
 */

/** The bytes of an answer kept by default (MCP_RESULT_BYTES): as much as `execute` keeps of its two streams. */
export const defaultResultBytes = 128 * 1024

/** The smallest cap: room for the notes that say what was cut. */
export const minResultBytes = 1024

/** An answer as the server gave it (McpServers.McpToolResult), and whether it was cut. */
export interface CappableResult {
  readonly server: string
  readonly tool: string
  readonly content: ReadonlyArray<unknown>
  readonly isError: boolean
  readonly structuredContent?: unknown
  /** Set only on an answer cut to the cap: its JSON's size before and after. */
  readonly truncated?: { readonly bytes: number; readonly keptBytes: number }
}

const jsonBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value) ?? "null", "utf8")

/** The longest prefix of `text` whose JSON string is at most `bytes` bytes (never cutting a character in two). */
const prefixWithin = (text: string, bytes: number): string => {
  if (jsonBytes(text) <= bytes) return text
  let low = 0
  let high = text.length
  while (low < high) {
    const mid = Math.ceil((low + high) / 2)
    if (jsonBytes(text.slice(0, mid)) <= bytes) low = mid
    else high = mid - 1
  }
  // A lone high surrogate at the end is half a character.
  const code = text.charCodeAt(low - 1)
  return code >= 0xd800 && code <= 0xdbff ? text.slice(0, low - 1) : text.slice(0, low)
}

const typeOf = (item: unknown): string =>
  typeof item === "object" && item !== null && "type" in item && typeof item.type === "string"
    ? item.type.slice(0, 32)
    : "unknown"

const textOf = (item: unknown): string | undefined =>
  typeOf(item) === "text" && typeof (item as { text?: unknown }).text === "string"
    ? (item as { text: string }).text
    : undefined

/** Room kept for the last note (its item) and the `truncated` field, so the answer stays under the cap. */
const notesReserve = 512

/** The answer, or what of it fits in `maxBytes` of JSON with notes on what was cut. */
export const capResult = <R extends CappableResult>(result: R, maxBytes: number): R => {
  const bytes = jsonBytes(result)
  if (bytes <= maxBytes) return result
  const { structuredContent, truncated: _, ...rest } = result
  // The answer's frame (names, isError, the keys) is counted once, then each item as it is kept.
  let budget = Math.max(0, maxBytes - notesReserve - jsonBytes({ ...rest, content: [] }))
  const content: Array<unknown> = []
  const notes: Array<string> = []
  for (const item of result.content) {
    const size = jsonBytes(item) + 1
    if (size <= budget) {
      content.push(item)
      budget -= size
      continue
    }
    const text = textOf(item)
    if (text !== undefined && budget > 64) {
      const kept = prefixWithin(text, budget - jsonBytes({ type: "text", text: "" }) - 1)
      content.push({ type: "text", text: kept })
      budget = 0
      notes.push(`a text item cut after ${Buffer.byteLength(kept, "utf8")} of ${Buffer.byteLength(text, "utf8")} bytes`)
      continue
    }
    // Later items may still fit (a short text after a screenshot): the budget is not spent.
    const type = typeOf(item)
    notes.push(`${/^[aeiou]/.test(type) ? "an" : "a"} ${type} item of ${size - 1} bytes left out`)
  }
  let kept: { structuredContent?: unknown } = {}
  if (structuredContent !== undefined) {
    const size = jsonBytes(structuredContent)
    if (size <= budget) kept = { structuredContent }
    else notes.push(`the structured content (${size} bytes) left out`)
  }
  // A few notes say what was cut; an answer of thousands of items gets a count of the rest.
  const shown = notes.length <= 4 ? notes : [...notes.slice(0, 3), `${notes.length - 3} more items left out`]
  const summary = `[the tool's answer of ${bytes} bytes was cut to the ${maxBytes}-byte cap: ${shown.join("; ")}]`
  const capped = {
    ...rest,
    content: [...content, { type: "text", text: prefixWithin(summary, notesReserve - 128) }],
    ...kept
  }
  return { ...capped, truncated: { bytes, keptBytes: jsonBytes(capped) } } as unknown as R
}
