/**
 * Everything that can end a CLI command early, as tagged values, and the ONE place they become an
 * exit code and a line on stderr. Commands fail with these; `main.ts` maps the final Exit through
 * `exitCodeOf`. The codes are part of the CLI's contract (apps/cli/README.md lists them).
 */
import { ValidationError } from "@effect/cli"
import { Cause, Exit, Option, Schema } from "effect"

/** Bad arguments or configuration, found before anything ran. */
export class UsageError extends Schema.TaggedError<UsageError>()("UsageError", { message: Schema.String }) {}

/** Nothing answered at the URL (connection refused, DNS, reset before an answer). */
export class ServerUnreachable extends Schema.TaggedError<ServerUnreachable>()("ServerUnreachable", {
  url: Schema.String,
  /** The transport's own code (ECONNREFUSED, ENOTFOUND, …) when it gave one. */
  code: Schema.optional(Schema.String),
  message: Schema.String
}) {}

/** 401: the server wants a token (API_TOKEN) and got none or another one. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {
  url: Schema.String,
  tokenSent: Schema.Boolean,
  message: Schema.String
}) {}

/** 404: no such effect, thread, receipt, route, or database file. */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}

/**
 * 409: the command id belongs to another command, the aggregate is quarantined, or the effect's
 * state refuses an operator's retry or cancel now (EffectActionRefused, with its reason).
 */
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", {
  error: Schema.String,
  message: Schema.String
}) {}

/** 400/403/413/415/422: the server refused the input as malformed, the request's host or origin, or the decider rejected the command. */
export class Refused extends Schema.TaggedError<Refused>()("Refused", {
  status: Schema.Number,
  error: Schema.String,
  message: Schema.String
}) {}

/** The server answered but could not do it (5xx, 503 storage/engine unavailable, an unreadable answer). */
export class ServerFailed extends Schema.TaggedError<ServerFailed>()("ServerFailed", {
  status: Schema.Number,
  error: Schema.String,
  message: Schema.String
}) {}

/** The SQLite file is locked by a running server (it holds it EXCLUSIVE). */
export class StoreBusy extends Schema.TaggedError<StoreBusy>()("StoreBusy", {
  file: Schema.String,
  message: Schema.String
}) {}

/** The file is not a store this CLI can read, or reading/writing it failed. */
export class StoreFailed extends Schema.TaggedError<StoreFailed>()("StoreFailed", {
  file: Schema.String,
  message: Schema.String
}) {}

/** `db check` found inconsistencies (the report was already printed). */
export class ProblemsFound extends Schema.TaggedError<ProblemsFound>()("ProblemsFound", {
  count: Schema.Number,
  message: Schema.String
}) {}

/** `serve` could not start or stopped with an error (the server printed why). */
export class ServeFailed extends Schema.TaggedError<ServeFailed>()("ServeFailed", { message: Schema.String }) {}

/** `status` reached a server that reports itself unavailable (the report was already printed). */
export class Unhealthy extends Schema.TaggedError<Unhealthy>()("Unhealthy", { message: Schema.String }) {}

export type CliError =
  | UsageError
  | ServerUnreachable
  | Unauthorized
  | NotFound
  | Conflict
  | Refused
  | ServerFailed
  | StoreBusy
  | StoreFailed
  | ProblemsFound
  | ServeFailed
  | Unhealthy

/** The documented exit codes. */
export const ExitCode = {
  ok: 0,
  /** Problems found (db check), the server reported itself unavailable, or the command failed. */
  failed: 1,
  usage: 2,
  unreachable: 3,
  unauthorized: 4,
  notFound: 5,
  storeBusy: 6,
  conflict: 7,
  refused: 8
} as const

export const exitCodeOfError = (error: CliError): number => {
  switch (error._tag) {
    case "UsageError":
      return ExitCode.usage
    case "ServerUnreachable":
      return ExitCode.unreachable
    case "Unauthorized":
      return ExitCode.unauthorized
    case "NotFound":
      return ExitCode.notFound
    case "Conflict":
      return ExitCode.conflict
    case "Refused":
      return ExitCode.refused
    case "StoreBusy":
      return ExitCode.storeBusy
    case "ServerFailed":
    case "StoreFailed":
    case "ProblemsFound":
    case "ServeFailed":
    case "Unhealthy":
      return ExitCode.failed
  }
}

const CliErrorSchema = Schema.Union(
  UsageError,
  ServerUnreachable,
  Unauthorized,
  NotFound,
  Conflict,
  Refused,
  ServerFailed,
  StoreBusy,
  StoreFailed,
  ProblemsFound,
  ServeFailed,
  Unhealthy
)

export const isCliError: (u: unknown) => u is CliError = Schema.is(CliErrorSchema)

/** What the operator reads on stderr; undefined when the command already printed its own report. */
export const messageOf = (error: CliError): string | undefined => {
  switch (error._tag) {
    case "ProblemsFound":
    case "ServeFailed":
    case "Unhealthy":
      return undefined
    default:
      return `error: ${error.message}`
  }
}

export interface Outcome {
  readonly code: number
  /** The line for stderr, if one is still to be printed. */
  readonly message?: string
}

/**
 * The Exit of the whole program as an exit code. Interrupted (Ctrl-C on `serve` or `events tail`)
 * is a normal end. @effect/cli's own ValidationError (unknown command, bad option) already printed
 * its help text: exit 2. A defect is a bug: exit 1 with its text.
 */
export const outcomeOf = (exit: Exit.Exit<unknown, unknown>): Outcome => {
  if (Exit.isSuccess(exit)) return { code: ExitCode.ok }
  if (Cause.isInterruptedOnly(exit.cause)) return { code: ExitCode.ok }
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure)) {
    const error = failure.value
    if (isCliError(error)) {
      const message = messageOf(error)
      return message === undefined ? { code: exitCodeOfError(error) } : { code: exitCodeOfError(error), message }
    }
    if (ValidationError.isValidationError(error)) {
      return ValidationError.isHelpRequested(error) ? { code: ExitCode.ok } : { code: ExitCode.usage }
    }
  }
  return {
    code: ExitCode.failed,
    message: `error: unexpected failure (a bug in the CLI):\n${Cause.pretty(exit.cause)}`
  }
}
