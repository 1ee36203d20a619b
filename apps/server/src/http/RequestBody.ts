/**
 * Reading a JSON body ourselves (the dispatch and operator routes use `handleRaw`) so the edge can
 * answer 413 past 1 MiB before anything is parsed, and shape a malformed body as the route's own
 * error (InvalidCommand for a command). The JSON content type of every state-changing request,
 * body or not, is required earlier, by Access.
 */
import type { HttpServerRequest } from "@effect/platform/HttpServerRequest"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { JsonDepth } from "@orchestration/engine"
import { Chunk, Effect, Stream } from "effect"
import type { IncomingMessage } from "node:http"
import { PayloadTooLarge, UnsupportedMediaType } from "../ApiErrors.js"
import { clip } from "../ClientValue.js"
import { isJson } from "./Access.js"

export const maxBodyBytes = 1024 * 1024

const strictUtf8 = new TextDecoder("utf-8", { fatal: true })

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

/** Bytes past the limit read and thrown away (the 413 keeps the connection) before the connection is cut. */
const discardAtMost = 8 * maxBodyBytes

/** Reads the rest of the body and throws it away; past `discardAtMost` bytes the connection is cut. */
const discardRest = (incoming: IncomingMessage) => {
  let discarded = 0
  incoming.on("data", (chunk: Buffer) => {
    discarded += chunk.length
    if (discarded > discardAtMost) incoming.destroy()
  })
}

const nodeRequest = (request: HttpServerRequest): IncomingMessage | undefined => {
  const incoming: IncomingMessage | undefined = NodeHttpServerRequest.toIncomingMessage(request)
  return incoming === undefined || typeof incoming.on !== "function" ? undefined : incoming
}

/**
 * The body, counted while it is read (a chunked body declares no length). Past the limit the rest is
 * read and thrown away rather than the request destroyed: destroying it closes the socket before the
 * 413 is written, and the client saw a reset connection; closing it after the answer gave a client
 * still writing its body EPIPE. A client that keeps sending past `discardAtMost` more is cut off.
 */
const readUpTo = (request: HttpServerRequest, limit: number): Effect.Effect<Buffer | "too-large" | "unreadable"> => {
  const incoming = nodeRequest(request)
  if (incoming === undefined) return readStreamUpTo(request, limit)
  return Effect.async<Buffer | "too-large" | "unreadable">((resume) => {
    const chunks: Array<Buffer> = []
    let total = 0
    const stop = () => {
      incoming.off("data", onData)
      incoming.off("end", onEnd)
      incoming.off("error", onError)
      incoming.off("aborted", onError)
    }
    const onData = (chunk: Buffer) => {
      total += chunk.length
      if (total <= limit) return void chunks.push(chunk)
      stop()
      chunks.length = 0
      discardRest(incoming)
      resume(Effect.succeed("too-large"))
    }
    const onEnd = () => {
      stop()
      resume(Effect.succeed(Buffer.concat(chunks)))
    }
    const onError = () => {
      stop()
      resume(Effect.succeed("unreadable"))
    }
    incoming.on("data", onData)
    incoming.once("end", onEnd)
    incoming.once("error", onError)
    incoming.once("aborted", onError)
    // Interrupted (the server stopping): stop listening; the server ends the connection itself.
    return Effect.sync(stop)
  })
}

/** `readUpTo` for a request that is not Node's (no socket to keep open): the stream, stopped at the limit. */
const readStreamUpTo = (request: HttpServerRequest, limit: number) => {
  let total = 0
  return request.stream.pipe(
    Stream.mapEffect((chunk) => {
      total += chunk.length
      return total > limit ? Effect.fail("too-large" as const) : Effect.succeed(chunk)
    }),
    Stream.runCollect,
    Effect.map((chunks): Buffer | "too-large" | "unreadable" => Buffer.concat(Chunk.toReadonlyArray(chunks))),
    Effect.catchAll((error) => Effect.succeed(error === "too-large" ? error : ("unreadable" as const)))
  )
}

export const readJsonBody = <E>(
  request: HttpServerRequest,
  options: ReadOptions<E>
): Effect.Effect<unknown, E | PayloadTooLarge | UnsupportedMediaType> =>
  Effect.gen(function* () {
    if (options.optional && !hasBody(request)) return undefined
    const declared = Number(request.headers["content-length"] ?? "0")
    if (declared > maxBodyBytes) {
      // Node would read and drop the whole declared body after the answer, however large: the rest is
      // thrown away up to `discardAtMost`, as past the limit of a body that declared nothing.
      const incoming = nodeRequest(request)
      if (incoming !== undefined) discardRest(incoming)
      return yield* tooLarge()
    }
    if (!isJson(request.headers["content-type"])) {
      return yield* new UnsupportedMediaType({
        message: `send JSON (Content-Type: application/json), not '${clip(request.headers["content-type"] ?? "nothing")}'`
      })
    }
    const read = yield* readUpTo(request, maxBodyBytes)
    if (read === "too-large") return yield* tooLarge()
    // The client went away or sent a broken body: nothing was dispatched, the client is told.
    if (read === "unreadable") return yield* Effect.fail(options.invalid("the request body could not be read"))
    // An optional body sent empty (chunked with no data) is no body, as one never sent.
    if (options.optional && read.length === 0) return undefined
    // Not replaced by U+FFFD: a byte that is not UTF-8 would be stored as a character nobody sent.
    const text = yield* Effect.try({
      try: () => strictUtf8.decode(read),
      catch: () => options.invalid("the request body is not valid UTF-8")
    })
    const value = yield* Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: (error) =>
        options.invalid(`the request body is not valid JSON: ${error instanceof Error ? error.message : String(error)}`)
    })
    // Bounded before anything recursive reads it (a schema's error message overflowed the stack).
    if (JsonDepth.deeperThan(value, JsonDepth.maxDepth))
      return yield* Effect.fail(options.invalid(`the request body ${JsonDepth.tooDeep}`))
    return value
  })
