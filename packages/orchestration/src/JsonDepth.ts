/**
 * How deep a JSON value nests, found without recursion. A value from outside (a client's command, an
 * operator's request body) is bounded before anything recursive reads it: printing a schema error,
 * the canonical JSON of a fingerprint and structural comparisons all recurse, and 6 KB of nested
 * arrays overflowed the stack while a refusal was being worded (an empty 500 at the HTTP edge,
 * 2026-12-05). No command of ours or of a reasonable domain nests anywhere near the limit.
 */

/** Levels an outside value may nest: `{}` and `[]` are one, `{"a": [1]}` two. */
export const maxDepth = 64

/** Whether `value` nests deeper than `limit` levels. */
export const deeperThan = (value: unknown, limit: number): boolean => {
  const values: Array<unknown> = [value]
  const depths: Array<number> = [0]
  while (values.length > 0) {
    const next = values.pop()
    const depth = depths.pop()!
    if (next === null || typeof next !== "object") continue
    if (depth + 1 > limit) return true
    for (const child of Array.isArray(next) ? next : Object.values(next)) {
      values.push(child)
      depths.push(depth + 1)
    }
  }
  return false
}

/** The refusal's wording, the same at every door. */
export const tooDeep = `nests deeper than ${maxDepth} levels`
