/**
 * Idempotent ingestion: an external event (a provider's runtime event, a webhook) enters as a
 * command whose id derives from the external event's id, so delivering it twice, even across a
 * crash, records it once: the second delivery finds the receipt.
 */
import { boundedId, INTERNAL_ID_MAX } from "./CommandId.js"

/** A source name kept as it is; any other is hashed, so two sources never share ids. */
const plainSource = /^[A-Za-z0-9._-]{1,64}$/

/** `ingest:<source>:<externalId>`; ids too long or with other characters are hashed, never truncated. */
export const ingestCommandId = (source: string, externalId: string): string =>
  boundedId(`ingest:${plainSource.test(source) ? source : boundedId("", source, 0)}:`, externalId, INTERNAL_ID_MAX)
