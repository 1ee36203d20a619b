/**
 * Canonical JSON (sorted keys, no whitespace) and the fingerprint of a command taken over it.
 * The fingerprint is computed over the command as the client sent it, before schema defaults, so
 * a later default never turns an honest retry into a conflict.
 */
import { createHash } from "node:crypto"

export const canonicalJson = (value: unknown): string => {
  if (value === null || typeof value !== "object") {
    // undefined and functions have no JSON form; they are dropped like JSON.stringify drops them.
    return JSON.stringify(value) ?? "null"
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  const entries = Object.keys(value)
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`)
  return `{${entries.join(",")}}`
}

export const fingerprint = (value: unknown): string => createHash("sha256").update(canonicalJson(value)).digest("hex")
