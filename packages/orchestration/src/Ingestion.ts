/**
 * Idempotent ingestion: an external event (a provider's runtime event, a webhook) enters as a
 * command whose id derives from the external event's id, so delivering it twice, even across a
 * crash, records it once: the second delivery finds the receipt.
 */
import { createHash } from "node:crypto"
import { INTERNAL_ID_MAX } from "./CommandId.js"

const safe = /[^A-Za-z0-9:._\-#]/g

/** `ingest:<source>:<externalId>`; ids too long or with other characters are hashed, never truncated. */
export const ingestCommandId = (source: string, externalId: string): string => {
  const id = `ingest:${source}:${externalId}`
  if (id.length <= INTERNAL_ID_MAX && !safe.test(id)) return id
  safe.lastIndex = 0
  const digest = createHash("sha256").update(externalId).digest("hex")
  return `ingest:${source.replace(safe, "_").slice(0, 64)}:sha256-${digest}`
}
