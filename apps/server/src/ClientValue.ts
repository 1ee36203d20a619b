/**
 * A value a client sent, bounded before it is echoed in an answer or written to a log: its first
 * characters and its length. A refused 900 KB id must cost a short line, not 900 KB per request.
 */

/** The most characters of one client value an answer or a log line carries. */
export const maxEchoed = 200

export const clip = (value: string): string =>
  value.length <= maxEchoed ? value : `${value.slice(0, maxEchoed)}…(${value.length} characters)`

/** Every string inside a value (an error's fields, its issues) clipped; other values as they are. */
export const clipAll = (value: unknown, depth = 0): unknown => {
  if (typeof value === "string") return clip(value)
  if (depth > 4 || value === null || typeof value !== "object") return value
  if (Array.isArray(value)) return value.slice(0, 50).map((item) => clipAll(item, depth + 1))
  const copy = Object.create(Object.getPrototypeOf(value)) as Record<string, unknown>
  // Own names, not only enumerable ones: an error's `message` is not enumerable.
  for (const key of Object.getOwnPropertyNames(value)) {
    if (key !== "stack") copy[key] = clipAll((value as Record<string, unknown>)[key], depth + 1)
  }
  return copy
}
