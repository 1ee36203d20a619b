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

/** How long a closing listener waits for the requests still open before it cuts their connections. */
export const defaultCloseGraceMs = 10_000

/**
 * What `NodeHttpServer.layer` is given in place of `http.createServer`. Its `close` (the listener's
 * release at shutdown) waits for the open requests to end, as Node's does, but at most `closeGraceMs`:
 * then it cuts every connection left. A client that stopped reading its event stream (the stream's
 * last write waits for a drain that never comes, past the shutdown's end-of-stream signal) or that
 * stopped in the middle of its request's body would otherwise keep the process alive for as long as
 * it likes. A cut connection interrupts its request's fiber (platform-node's handler does so when the
 * response closes unfinished).
 */
export const createServer = (closeGraceMs: number = defaultCloseGraceMs): Server => {
  const server = createNodeServer().on("clientError", onClientError)
  const close = server.close.bind(server)
  server.close = (callback?: (error?: Error) => void) => {
    const cut = setTimeout(() => server.closeAllConnections(), closeGraceMs)
    cut.unref()
    return close((error?: Error) => {
      clearTimeout(cut)
      callback?.(error)
    })
  }
  return server
}
