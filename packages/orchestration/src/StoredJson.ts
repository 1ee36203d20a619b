/**
 * A JSON column read without throwing. The engine writes every such column as JSON, but a row can be
 * cut off, edited by hand or left by a bad migration; a read that threw stopped whatever read it (a
 * reactor's claim, boot's replay, the timer loop's claim) at that one row. Each reader says what a
 * damaged value becomes (an undecodable event, a failed effect or timer).
 *
 * Valid JSON of another shape is damage too: a column read with `reader` is checked against the
 * schema of what was written, so a `{"foo":1}` is reported like a cut-off value instead of being
 * trusted by a cast and throwing (or rendering garbage) wherever a field it lacks is used.
 */
import { Either, ParseResult, type Schema, SchemaAST } from "effect"

export type Read<A = unknown> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly why: string }

/** How much of a parser's or decoder's message a reason keeps: the stored value can be any size. */
const MAX_DETAIL = 200

/** The parsed value, or why `what` ("payload", "command") cannot be read, bounded. */
export const read = (text: string, what: string): Read => {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch (error) {
    const reason = error instanceof Error ? error.message : "not JSON"
    return { ok: false, why: `its stored ${what} is not JSON (${reason.slice(0, MAX_DETAIL)})` }
  }
}

/**
 * Reads `what` as `schema` decodes it: the decoded value, or why it cannot be read (not JSON, or not
 * of the shape). The decoder is built once, here, not per row.
 */
export const reader = <A, I>(schema: Schema.Schema<A, I, never>, what: string) => {
  const decode = decoder(schema)
  return (text: string): Read<A> => {
    const parsed = read(text, what)
    return parsed.ok ? decode(parsed.value, what) : parsed
  }
}

/**
 * Checks a value already parsed from its column (an outbox row's payload) against `schema`: the
 * decoded value, or why it is not of the shape. The decoder is built once, here, not per value.
 */
export const decoder = <A, I>(schema: Schema.Schema<A, I, never>) => {
  const decode = ParseResult.decodeUnknownEither(schema)
  return (value: unknown, what: string): Read<A> => {
    const decoded = decode(value)
    return Either.isRight(decoded)
      ? { ok: true, value: decoded.right }
      : {
          ok: false,
          why: `its stored ${what} does not have the expected shape (${firstProblem(decoded.left).slice(0, MAX_DETAIL)})`
        }
  }
}

/**
 * Where the first problem is and what was expected there, never the value found: a decoder's own
 * message quotes the actual value, which here is the stored (possibly huge) column.
 */
const firstProblem = (issue: ParseResult.ParseIssue, path: ReadonlyArray<PropertyKey> = []): string => {
  switch (issue._tag) {
    case "Pointer":
      return firstProblem(issue.issue, [...path, ...(Array.isArray(issue.path) ? issue.path : [issue.path])])
    case "Composite": {
      const issues: ReadonlyArray<ParseResult.ParseIssue> = Array.isArray(issue.issues)
        ? issue.issues
        : [issue.issues as ParseResult.ParseIssue]
      if (SchemaAST.isUnion(issue.ast) && issues.length > 1) {
        // A member whose outer type fit (a list, where an optional list may be undefined too) has the real problem inside.
        const inside = issues.filter((i) => i._tag !== "Type")
        // Otherwise no member took the value: what any member expects says more than the first one's complaint.
        return inside.length === 1 ? firstProblem(inside[0]!, path) : expected(path, issue.ast)
      }
      return firstProblem(issues[0]!, path)
    }
    case "Refinement":
    case "Transformation":
      return firstProblem(issue.issue, path)
    case "Missing":
      return `${where(path)} is missing`
    case "Unexpected":
      return `${where(path)} is not expected`
    case "Forbidden":
      return `${where(path)} cannot be decoded`
    case "Type":
      return expected(path, issue.ast)
  }
}

const where = (path: ReadonlyArray<PropertyKey>): string =>
  path.length === 0 ? "the value" : path.map(String).join(".")

const expected = (path: ReadonlyArray<PropertyKey>, ast: SchemaAST.AST): string =>
  `${path.length === 0 ? "" : `${where(path)}: `}expected ${describe(ast)}`

/** A schema in a few words: an object's or a list's every field would fill the bounded reason by itself. */
const describe = (ast: SchemaAST.AST): string => {
  if (SchemaAST.isTypeLiteral(ast)) return "an object"
  if (SchemaAST.isTupleType(ast)) return "a list"
  if (SchemaAST.isUnion(ast)) return [...new Set(ast.types.map(describe))].join(" | ")
  return String(ast)
}
