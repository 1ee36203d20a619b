/**
 * Node's HTTP server, with the requests it cannot parse answered in the API's `{ error, message }`
 * shape. Node answers those itself (431 for oversized headers, 400 for broken HTTP) with an empty
 * body unless the server handles `clientError`; this handler answers as Node would, with a body.
 */
import { createServer as createNodeServer, maxHeaderSize, type Server } from "node:http"
import type { Duplex } from "node:stream"

const answer = (status: number, reason: string, body: { readonly error: string; readonly message: string }) => {
  const text = JSON.stringify(body)
  return `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`
}

const onClientError = (error: NodeJS.ErrnoException, socket: Duplex) => {
  // Once a response has started on this connection nothing more can be said on it (Node's own rule).
  const started = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true
  if (error.code === "ECONNRESET" || !socket.writable || started) {
    socket.destroy()
    return
  }
  socket.end(
    error.code === "HPE_HEADER_OVERFLOW"
      ? answer(431, "Request Header Fields Too Large", {
          error: "RequestHeadersTooLarge",
          message: `the request's headers are larger than ${maxHeaderSize} bytes`
        })
      : error.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? answer(408, "Request Timeout", { error: "RequestTimeout", message: "the request was not received in time" })
        : answer(400, "Bad Request", { error: "InvalidRequest", message: "the request is not valid HTTP/1.1" })
  )
}

/** What `NodeHttpServer.layer` is given in place of `http.createServer`. */
export const createServer = (): Server => createNodeServer().on("clientError", onClientError)
