/**
 * The values a request carries outside its body (query parameters, path parameters, Last-Event-ID),
 * each refused with a message that says what it may be, with the client's value clipped. Numbers
 * are plain decimal integers, read by one parser: no sign, exponent, hex, fraction or spaces.
 */
import { ParseResult, Schema } from "effect"
import { clip } from "../ClientValue.js"

/** Digits only, within the safe integers; undefined for anything else. */
export const parseDecimal = (text: string): number | undefined => {
  if (!/^\d{1,16}$/.test(text)) return undefined
  const value = Number(text)
  return Number.isSafeInteger(value) ? value : undefined
}

/** A whole number from `min` to `max`, written in decimal digits. */
export const DecimalInteger = (min: number, max: number) => {
  const allowed =
    max === Number.MAX_SAFE_INTEGER ? `a whole number from ${min}` : `a whole number from ${min} to ${max}`
  return Schema.transformOrFail(Schema.String, Schema.Number, {
    strict: true,
    decode: (text, _, ast) => {
      const value = parseDecimal(text)
      return value !== undefined && value >= min && value <= max
        ? ParseResult.succeed(value)
        : ParseResult.fail(new ParseResult.Type(ast, text, `must be ${allowed} in decimal digits, got '${clip(text)}'`))
    },
    encode: (value) => ParseResult.succeed(String(value))
  })
}

/** A log sequence (`after=`): 0 or more. */
export const Sequence = DecimalInteger(0, Number.MAX_SAFE_INTEGER)

/** One of a closed set of words (`status=`, `order=`). */
export const OneOf = <const Words extends ReadonlyArray<string>>(...words: Words) =>
  Schema.Literal(...words).annotations({
    message: (issue) => ({
      message: `must be one of ${words.join(", ")}, got '${clip(String(issue.actual))}'`,
      override: true
    })
  })

/**
 * Why a thread id cannot name a thread, or undefined: ids reach files and URLs, so nothing that
 * reads as a path (`.`, `..`, a slash, a backslash, a control character) and nothing oversized.
 */
export const threadIdProblem = (id: string): string | undefined => {
  if (id.length === 0 || id.length > 200) return "must be 1 to 200 characters"
  if (/^\.+$/.test(id)) return `must not be '.' or '..' (got '${clip(id)}')`
  if (/[/\\]/.test(id)) return "must not contain '/' or '\\'"
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(id)) return "must not contain control characters"
  return undefined
}

export const ThreadId = Schema.String.pipe(Schema.filter((id) => threadIdProblem(id) ?? true))
