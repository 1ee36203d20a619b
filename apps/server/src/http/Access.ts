/**
 * Who may call what, decided once per request on the route that matched (RouteMatch), never on
 * how its path was spelled. Default-deny: every route needs the token except the public list, and
 * whatever the token, a request must name this server in `Host` (DNS rebinding), and a
 * state-changing one must come from no foreign `Origin` and carry a JSON content type, which a
 * cross-site form or `fetch(…, {mode: "no-cors"})` cannot send. A pure decider, tested alone.
 */
import { Forbidden, Unauthorized, UnsupportedMediaType } from "../ApiErrors.js"
import { clip } from "../ClientValue.js"

/**
 * The routes anyone may call. /health: load balancers probe it without credentials. The dashboard's
 * shell (/, /index.html, /assets/*): the page asks for the token and sends it on its API calls.
 * /docs and /openapi.json describe the API, which is public in the source; they hold no data.
 * /metrics is not public: its counts show what the server is doing, and Prometheus sends a bearer token.
 */
export const publicRoutes: ReadonlySet<string> = new Set([
  "/health",
  "/",
  "/index.html",
  "/assets/*",
  "/docs",
  "/openapi.json"
])

/** The only routes that take the token as `?access_token=`: a browser's EventSource cannot send headers. */
export const tokenInQueryRoutes: ReadonlySet<string> = new Set(["/v1/events/stream", "/v1/threads/:threadId/stream"])

export interface AccessPolicy {
  /** Undefined: no token is configured, every route is open (on loopback, or ALLOW_UNAUTHENTICATED). */
  readonly token: string | undefined
  /** Names a request's Host may carry: the bound address (unless a wildcard), loopback names, ALLOWED_HOSTS. */
  readonly hosts: ReadonlySet<string>
  /** ALLOWED_HOSTS: names a state-changing request's Origin may carry besides this server's own origin. */
  readonly origins: ReadonlySet<string>
}

export interface AccessRequest {
  readonly method: string
  /** The route that matched, as its template; undefined when none did. */
  readonly route: string | undefined
  readonly host: string | undefined
  readonly origin: string | undefined
  readonly contentType: string | undefined
  readonly token: string | undefined
}

const wildcards = new Set(["0.0.0.0", "::"])

export const policyOf = (options: {
  readonly boundHost: string
  readonly allowedHosts: ReadonlyArray<string>
  readonly token: string | undefined
}): AccessPolicy => ({
  token: options.token,
  hosts: new Set([
    "localhost",
    "127.0.0.1",
    "::1",
    ...(wildcards.has(options.boundHost) ? [] : [options.boundHost.toLowerCase()]),
    ...options.allowedHosts
  ]),
  origins: new Set(options.allowedHosts)
})

/** The name in a Host header, without its port or IPv6 brackets: `[::1]:8787` → `::1`. */
export const hostName = (header: string): string => {
  const value = header.trim().toLowerCase()
  const bracketed = /^\[([^\]]*)\](?::\d*)?$/.exec(value)
  if (bracketed !== null) return bracketed[1]!
  return value.replace(/:\d*$/, "")
}

export const isJson = (contentType: string | undefined): boolean => {
  if (contentType === undefined) return false
  const [type, ...parameters] = contentType.split(";")
  const media = type!.trim().toLowerCase()
  if (!(media === "application/json" || (media.startsWith("application/") && media.endsWith("+json")))) return false
  // JSON is UTF-8 (RFC 8259), and bodies are read as such: a body said to be in another charset is not
  // taken as JSON, rather than read as UTF-8 whatever it holds.
  return parameters.every((parameter) => {
    const [name, value] = parameter.split("=")
    if (name?.trim().toLowerCase() !== "charset") return true
    return /^"?utf-?8"?$/.test((value ?? "").trim().toLowerCase())
  })
}

const safeMethods = new Set(["GET", "HEAD", "OPTIONS"])

export const isStateChanging = (method: string): boolean => !safeMethods.has(method.toUpperCase())

/** Same origin as the Host the request names (this server, plain HTTP), or a host named in ALLOWED_HOSTS. */
const originAllowed = (origin: string, host: string | undefined, policy: AccessPolicy): boolean => {
  let url: URL
  try {
    url = new URL(origin)
  } catch {
    return false
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return false
  if (url.protocol === "http:" && host !== undefined && url.host === host.trim().toLowerCase()) return true
  return policy.origins.has(hostName(url.host))
}

export type Refusal = Forbidden | Unauthorized | UnsupportedMediaType

/** Undefined when the request may go on to its route; otherwise the answer it gets instead. */
export const decideAccess = (
  request: AccessRequest,
  policy: AccessPolicy,
  tokenMatches: (presented: string, expected: string) => boolean
): Refusal | undefined => {
  if (request.host === undefined || !policy.hosts.has(hostName(request.host))) {
    return new Forbidden({
      reason: "foreign-host",
      message: `this server does not answer to Host '${clip(request.host ?? "")}' (add the name to ALLOWED_HOSTS)`
    })
  }
  if (policy.token !== undefined && (request.route === undefined || !publicRoutes.has(request.route))) {
    if (request.token === undefined || !tokenMatches(request.token, policy.token)) {
      return new Unauthorized({ message: "send Authorization: Bearer <API_TOKEN>" })
    }
  }
  if (isStateChanging(request.method)) {
    if (request.origin !== undefined && !originAllowed(request.origin, request.host, policy)) {
      return new Forbidden({
        reason: "foreign-origin",
        message: `state-changing requests from origin '${clip(request.origin)}' are refused`
      })
    }
    if (!isJson(request.contentType)) {
      return new UnsupportedMediaType({
        message: `send JSON (Content-Type: application/json), not '${clip(request.contentType ?? "nothing")}'`
      })
    }
  }
  return undefined
}
