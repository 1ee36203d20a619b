/**
 * The errors the HTTP edge answers with, and the one place engine failures become them. On the wire
 * every error is `{ "error": "<Tag>", "message": "...", ...fields }`: the classes are ordinary
 * Schema.TaggedErrors and `onWire` renames `_tag` to `error` for the body, so handlers fail with
 * typed values and the typed client decodes them back.
 */
import { HttpApiSchema } from "@effect/platform"
import {
  AggregateUnavailable,
  CommandDefect,
  CommandIdConflict,
  CommandRejected,
  EffectNotQuarantined,
  EffectStillQuarantined,
  EffectActionRefused,
  InvalidCommand,
  ROW_DAMAGE_CODES,
  type DispatchError,
  type StorageFailure
} from "@orchestration/engine"
import { Schema } from "effect"

export {
  AggregateUnavailable,
  CommandDefect,
  CommandIdConflict,
  CommandRejected,
  EffectActionRefused,
  EffectNotQuarantined,
  EffectStillQuarantined,
  InvalidCommand
}

const Issue = Schema.Struct({ path: Schema.Array(Schema.String), message: Schema.String })

/** A request (not a command) is malformed: a bad query parameter, path or operator body. */
export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", {
  message: Schema.String,
  issues: Schema.Array(Issue)
}) {}

export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}

export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", { message: Schema.String }) {}

/** The request names another host (DNS rebinding) or comes from a foreign page: refused whatever the token. */
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", {
  message: Schema.String,
  reason: Schema.Literal("foreign-host", "foreign-origin")
}) {}

export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", {
  message: Schema.String,
  limitBytes: Schema.Number
}) {}

export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()("UnsupportedMediaType", {
  message: Schema.String
}) {}

/** The store refused the write, or the data volume is below its floor. Retry later. */
export class StorageUnavailable extends Schema.TaggedError<StorageUnavailable>()("StorageUnavailable", {
  message: Schema.String,
  reason: Schema.String
}) {}

/**
 * A stored row the engine cannot read (cut off, edited by hand), or a damaged store file: asking again
 * reads the same bytes, so this is no outage to wait out (503) but damage an operator repairs. The
 * message names the row and what is wrong with it, never its contents.
 */
export class StorageCorrupt extends Schema.TaggedError<StorageCorrupt>()("StorageCorrupt", {
  message: Schema.String,
  /** The engine's or the driver's code (RECEIPT_UNREADABLE, SQLITE_CORRUPT, …). */
  code: Schema.String,
  /** `row`: one stored row cannot be read; `store`: the store reports its file damaged (health is unavailable). */
  scope: Schema.Literal("row", "store")
}) {}

/**
 * The server failed on this request by a defect of its own (a bug, not the store or the input): the
 * request's outcome is what the rest of the answer path says it is; the cause is in the server's log,
 * never in the answer, which might otherwise carry what the client sent.
 */
export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", { message: Schema.String }) {}

/** The server is still opening, migrating or reconciling its store: nothing is served yet. Retry later. */
export class Starting extends Schema.TaggedError<Starting>()("Starting", { message: Schema.String }) {}

/** The engine is not admitting: starting, shutting down, or its queue is full. Retry later. */
export class EngineUnavailable extends Schema.TaggedError<EngineUnavailable>()("EngineUnavailable", {
  message: Schema.String,
  reason: Schema.Literal("not-activated", "shutting-down", "overloaded")
}) {}

type TaggedClass<Self> = Schema.Schema<Self, any, never> & {
  readonly fields: Schema.Struct.Fields
  readonly _tag: string
}

/** The wire schema of an error class: `_tag` travels as `error`, with its HTTP status attached. */
export const onWire = <Self>(cls: TaggedClass<Self>, status: number): Schema.Schema<Self, any, never> => {
  const { _tag, ...fields } = cls.fields
  return Schema.transform(Schema.Struct({ error: Schema.Literal(cls._tag), ...fields }), cls, {
    strict: false,
    decode: ({ error, ...rest }: any) => ({ _tag: error, ...rest }),
    encode: ({ _tag, ...rest }: any) => ({ error: _tag, ...rest })
  }).annotations(HttpApiSchema.annotations({ status })) as any
}

export const Wire = {
  InvalidCommand: onWire(InvalidCommand, 400),
  InvalidRequest: onWire(InvalidRequest, 400),
  Unauthorized: onWire(Unauthorized, 401),
  Forbidden: onWire(Forbidden, 403),
  NotFound: onWire(NotFound, 404),
  CommandIdConflict: onWire(CommandIdConflict, 409),
  // A quarantined aggregate stays unavailable until an operator repairs its log: retrying (what
  // clients do on 503) cannot help, so it is a 409 about that aggregate, not a server outage.
  AggregateUnavailable: onWire(AggregateUnavailable, 409),
  // Operator actions on a quarantined effect: the row is not parked, or its cause is still there.
  EffectNotQuarantined: onWire(EffectNotQuarantined, 409),
  EffectStillQuarantined: onWire(EffectStillQuarantined, 409),
  // An operator's retry or cancel that the effect's state does not allow now (`reason` says why);
  // it is not stored, so the same request succeeds once the state allows it.
  EffectActionRefused: onWire(EffectActionRefused, 409),
  PayloadTooLarge: onWire(PayloadTooLarge, 413),
  UnsupportedMediaType: onWire(UnsupportedMediaType, 415),
  CommandRejected: onWire(CommandRejected, 422),
  CommandDefect: onWire(CommandDefect, 500),
  StorageCorrupt: onWire(StorageCorrupt, 500),
  InternalError: onWire(InternalError, 500),
  StorageUnavailable: onWire(StorageUnavailable, 503),
  EngineUnavailable: onWire(EngineUnavailable, 503),
  Starting: onWire(Starting, 503)
} as const

/**
 * Each wire error's HTTP status by its tag, read off `Wire` (so never a second list): clients such as
 * apps/cli map a decoded error body to the status it came with.
 */
export const statusOfTag: Readonly<Record<string, number>> = Object.fromEntries(
  Object.entries(Wire).map(([tag, schema]) => [tag, HttpApiSchema.getStatusError(schema)])
)

export type ApiDispatchError =
  | InvalidCommand
  | CommandIdConflict
  | CommandRejected
  | EffectActionRefused
  | StorageUnavailable
  | StorageCorrupt
  | EngineUnavailable
  | AggregateUnavailable
  | CommandDefect

/** A store's failure as the edge answers it: damage (500, not retried) or a refusal to wait out (503). */
export const fromStorageFailure = (failure: StorageFailure): StorageUnavailable | StorageCorrupt =>
  failure.reason === "corrupt"
    ? new StorageCorrupt({
        code: failure.code,
        scope: ROW_DAMAGE_CODES.has(failure.code) ? "row" : "store",
        message: `the store holds damaged data (${failure.code}) at ${failure.operation}: ${failure.message}`
      })
    : new StorageUnavailable({
        reason: failure.reason,
        message: `the store failed (${failure.code}) during ${failure.operation}: ${failure.message}`
      })

/** The one mapping from the engine's dispatch failures to what the edge answers. */
export const fromDispatchError = (error: DispatchError): ApiDispatchError => {
  switch (error._tag) {
    case "StorageFailure":
      return fromStorageFailure(error)
    case "EngineUnavailable":
      return error.reason === "storage-below-floor"
        ? new StorageUnavailable({ reason: "below-floor", message: error.message })
        : new EngineUnavailable({ reason: error.reason, message: error.message })
    default:
      return error
  }
}
