/**
 * Canonical JSON (sorted keys, no whitespace) and the fingerprint of a command taken over it.
 * The fingerprint is computed over the command as the client sent it, before schema defaults, so
 * a later default never turns an honest retry into a conflict.
 *
 * Receipts store the fingerprint, so its text must never change: a stored command retried after an
 * upgrade must still match. Every command is fingerprinted once, so this is built with plain loops
 * (no intermediate arrays of parts), and hashed with the one-shot `hash` (same digest as createHash).
 */
import { hash } from "node:crypto"

export const canonicalJson = (value: unknown): string => {
  if (value === null || typeof value !== "object") {
    // undefined and functions have no JSON form; they are dropped like JSON.stringify drops them.
    return JSON.stringify(value) ?? "null"
  }
  if (Array.isArray(value)) {
    let out = "["
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ","
      // A hole in a sparse array is written as nothing, as `map` and `join` wrote it before.
      if (i in value) out += canonicalJson(value[i])
    }
    return `${out}]`
  }
  const record = value as Record<string, unknown>
  const keys = Object.keys(record).sort()
  let out = "{"
  for (const key of keys) {
    const field = record[key]
    if (field === undefined) continue
    if (out.length > 1) out += ","
    out += `${JSON.stringify(key)}:${canonicalJson(field)}`
  }
  return `${out}}`
}

export const fingerprint = (value: unknown): string => hash("sha256", canonicalJson(value), "hex")
