/**
 * A JSON column read without throwing. The engine writes every such column as JSON, but a row can be
 * cut off, edited by hand or left by a bad migration; a read that threw stopped whatever read it (a
 * reactor's claim, boot's replay, the timer loop's claim) at that one row. Each reader says what a
 * damaged value becomes (an undecodable event, a failed effect or timer).
 */
export type Read = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly why: string }

/** The parsed value, or why `what` ("payload", "command") cannot be read, bounded. */
export const read = (text: string, what: string): Read => {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch (error) {
    const reason = error instanceof Error ? error.message : "not JSON"
    return { ok: false, why: `its stored ${what} is not JSON (${reason.slice(0, 200)})` }
  }
}
