/**
 * Reading a JSON body ourselves (the dispatch and operator routes use `handleRaw`) so the edge can
 * answer 413 past 1 MiB before anything is parsed, and shape a malformed body as the route's own
 * error (InvalidCommand for a command). The JSON content type of every state-changing request,
 * body or not, is required earlier, by Access.
 */
import type { HttpServerRequest } from "@effect/platform/HttpServerRequest"
import { Chunk, Effect, Stream } from "effect"
import { PayloadTooLarge, UnsupportedMediaType } from "../ApiErrors.js"
import { clip } from "../ClientValue.js"
import { isJson } from "./Access.js"

export const maxBodyBytes = 1024 * 1024

const tooLarge = () =>
  new PayloadTooLarge({ message: `the request body is larger than ${maxBodyBytes} bytes`, limitBytes: maxBodyBytes })

export interface ReadOptions<E> {
  /** An absent body is allowed and reads as undefined (operator actions). */
  readonly optional: boolean
  /** The route's error for a body that is not JSON. */
  readonly invalid: (message: string) => E
}

const hasBody = (request: HttpServerRequest) => {
  const length = request.headers["content-length"]
  if (length !== undefined) return Number(length) > 0
  return request.headers["transfer-encoding"] !== undefined
}

export const readJsonBody = <E>(
  request: HttpServerRequest,
  options: ReadOptions<E>
): Effect.Effect<unknown, E | PayloadTooLarge | UnsupportedMediaType> =>
  Effect.gen(function* () {
    if (options.optional && !hasBody(request)) return undefined
    const declared = Number(request.headers["content-length"] ?? "0")
    if (declared > maxBodyBytes) return yield* tooLarge()
    if (!isJson(request.headers["content-type"])) {
      return yield* new UnsupportedMediaType({
        message: `send JSON (Content-Type: application/json), not '${clip(request.headers["content-type"] ?? "nothing")}'`
      })
    }
    // Count while reading: a chunked body declares no length.
    let total = 0
    const chunks = yield* request.stream.pipe(
      // The client went away or sent a broken body: nothing was dispatched, the client is told.
      Stream.mapError(() => options.invalid("the request body could not be read")),
      Stream.mapEffect((chunk) => {
        total += chunk.length
        return total > maxBodyBytes ? Effect.fail(tooLarge()) : Effect.succeed(chunk)
      }),
      Stream.runCollect
    )
    const text = Buffer.concat(Chunk.toReadonlyArray(chunks)).toString("utf8")
    return yield* Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: (error) =>
        options.invalid(`the request body is not valid JSON: ${error instanceof Error ? error.message : String(error)}`)
    })
  })
