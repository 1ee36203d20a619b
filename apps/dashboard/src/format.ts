/** Pure formatting helpers: ages, counts, and what an effect's error says. */

/** `850ms`, `12s`, `3m 04s`, `2h 05m`, `3d 4h`. Negative ages (clock skew) read as 0. */
export const formatAge = (ms: number): string => {
  const age = Math.max(0, ms)
  if (age < 1000) return `${Math.round(age)}ms`
  const s = Math.floor(age / 1000)
  if (s < 60) return `${s}s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, "0")}s`
  const h = Math.floor(m / 60)
  if (h < 24) return `${h}h ${String(m % 60).padStart(2, "0")}m`
  return `${Math.floor(h / 24)}d ${h % 24}h`
}

/** `just now` under a second, else `12s ago`. */
export const formatAgo = (ms: number): string => (ms < 1000 ? "just now" : `${formatAge(ms)} ago`)

export const formatCount = (n: number): string => n.toLocaleString("en-US")

/** A rate with a sensible number of digits: `0`, `0.35`, `4.2`, `120`. */
export const formatRate = (perSecond: number): string =>
  perSecond === 0
    ? "0"
    : perSecond < 1
      ? perSecond.toFixed(2)
      : perSecond < 10
        ? perSecond.toFixed(1)
        : Math.round(perSecond).toString()

/** The human reason in a stored effect error (`{ message, code? }`), or its JSON. */
export const errorReason = (error: unknown): string | undefined => {
  if (error === null || error === undefined) return undefined
  if (typeof error === "string") return error
  if (typeof error === "object" && "message" in error && typeof error.message === "string") {
    const code = "code" in error && typeof error.code === "string" ? ` [${error.code}]` : ""
    return `${error.message}${code}`
  }
  return JSON.stringify(error)
}

/** Why a row is quarantined, in one line: the closed reason, who parked it, and the message (shortened). */
export const quarantineReason = (effect: {
  readonly quarantine?: { readonly reason: string; readonly by: string; readonly message: string } | null | undefined
  readonly quarantineUnreadable?: string | undefined
}): string =>
  effect.quarantineUnreadable !== undefined
    ? `record unreadable: ${preview(effect.quarantineUnreadable, 300)}`
    : effect.quarantine === null || effect.quarantine === undefined
      ? "quarantined (no reason stored)"
      : `${effect.quarantine.reason} (found by ${effect.quarantine.by}): ${preview(effect.quarantine.message, 300)}`

/** An awaiting call's arguments as the operator reads them before approving: JSON, or why they cannot be read. */
export const approvalArguments = (approval: {
  readonly arguments: unknown
  readonly undecodable?: string | undefined
}) =>
  approval.undecodable === undefined
    ? JSON.stringify(approval.arguments, null, 2)
    : `arguments unreadable: ${preview(approval.undecodable, 300)}`

/** The transcript's stored messages that cannot be read (they are not in its list), in one line; none: undefined. */
export const unreadableMessagesNote = (
  unreadable: ReadonlyArray<{ readonly position: number; readonly why: string }> | undefined
): string | undefined =>
  unreadable === undefined || unreadable.length === 0
    ? undefined
    : `${unreadable.length} message${unreadable.length === 1 ? "" : "s"} cannot be read and ${
        unreadable.length === 1 ? "is" : "are"
      } not shown: ${unreadable.map((m) => `message ${m.position}: ${preview(m.why, 300)}`).join("; ")}`

/** A JSON value shortened for a table cell. */
export const preview = (value: unknown, max = 240): string => {
  const text = typeof value === "string" ? value : JSON.stringify(value)
  if (text === undefined) return ""
  return text.length > max ? `${text.slice(0, max - 1)}…` : text
}

/** Whether a running turn has made no progress (no event of its thread) for longer than the limit. */
export const isStuck = (
  turnStatus: string | undefined,
  lastEventAt: number,
  now: number,
  stuckAfterMs: number
): boolean => turnStatus === "running" && now - lastEventAt > stuckAfterMs
