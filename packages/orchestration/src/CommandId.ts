/**
 * Command ids: who may use which. Clients send short ids of a safe alphabet; the engine builds longer
 * ids for its own commands (outcomes, reconcile, delegates) under reserved prefixes, and reserves the
 * types of its internal commands, so a client can never forge an outcome or a reconcile.
 */

/** Who is dispatching: a client over the API, or the engine and its reactors. */
export type Origin = "client" | "internal"

import { createHash } from "node:crypto"

const alphabet = /^[A-Za-z0-9:._\-#]+$/

export const CLIENT_ID_MAX = 128
export const INTERNAL_ID_MAX = 512

/** Id prefixes only the engine may use. */
export const reservedIdPrefixes: ReadonlyArray<string> = [
  "outcome:",
  "reconcile:",
  "reclaim:",
  "delegate:",
  "operator:",
  "ingest:",
  "engine:",
  "timer:",
  // The agents domain's trigger ticks and edits: a client id there could take a tick's place.
  "trigger:",
  "trigger-edit:"
]

/** Command type namespaces only the engine may use. */
export const reservedTypePrefixes: ReadonlyArray<string> = ["effect.", "engine."]

export const isReservedType = (type: string): boolean => reservedTypePrefixes.some((p) => type.startsWith(p))

/** Returns why the id is not acceptable from this origin, or undefined when it is. */
export const commandIdProblem = (id: unknown, origin: Origin): string | undefined => {
  if (typeof id !== "string") return "commandId must be a string"
  const max = origin === "client" ? CLIENT_ID_MAX : INTERNAL_ID_MAX
  if (id.length === 0 || id.length > max) return `commandId must be 1 to ${max} characters`
  if (!alphabet.test(id)) return "commandId may only contain A-Z a-z 0-9 : . _ - #"
  if (origin === "client") {
    const prefix = reservedIdPrefixes.find((p) => id.startsWith(p))
    if (prefix !== undefined) return `commandId prefix '${prefix}' is reserved for the engine`
  }
  return undefined
}

/** The longest effect id: its outcome id (`outcome:<effectId>#<attempt>`) must still fit. */
export const EFFECT_ID_MAX = INTERNAL_ID_MAX - 32

/**
 * An id that fits the command-id alphabet and length. Short safe ids are kept as they are; a long or
 * unsafe part is replaced by its hash, never truncated, so distinct inputs stay distinct.
 */
export const boundedId = (prefix: string, part: string, max: number = EFFECT_ID_MAX): string => {
  const id = `${prefix}${part}`
  if (id.length <= max && alphabet.test(id)) return id
  return `${prefix}sha256-${createHash("sha256").update(part).digest("hex")}`
}
