/**
 * When a trigger fires: a cron expression read in an IANA time zone, by croner (a maintained parser
 * with time-zone support; no hand-written cron here). Pure functions of their arguments, so the
 * trigger decider stays pure: the time to search from is always given (the command's `ctx.now`).
 *
 * Five fields (minute resolution) or a nickname (`@daily`, `@hourly`, ...); croner's optional seconds
 * field is refused, so a trigger starts at most one turn a minute. A local time a DST switch skips
 * (02:30 on a spring-forward night) fires at the first valid minute after it; a local time that
 * occurs twice (01:30 on a fall-back night) fires once, at its first occurrence.
 */
import { Cron } from "croner"

export const DEFAULT_TIMEZONE = "UTC"

export interface CronRefusal {
  readonly field: "cron" | "timezone"
  readonly message: string
}

const isValidTimezone = (timezone: string): boolean => {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: timezone })
    return true
  } catch {
    return false // swallow-ok: a RangeError is exactly the answer "not a time zone"
  }
}

/** Why the schedule is refused, or undefined when it is acceptable and has a future fire time after `from`. */
export const problemOf = (cron: string, timezone: string, from: number): CronRefusal | undefined => {
  if (!isValidTimezone(timezone)) {
    return { field: "timezone", message: `'${timezone}' is not an IANA time zone (e.g. 'Europe/Berlin', 'UTC')` }
  }
  const fields = cron.trim().split(/\s+/)
  if (!cron.trim().startsWith("@") && fields.length !== 5) {
    return {
      field: "cron",
      message: `cron '${cron}' has ${fields.length} fields; five are required (minute hour day-of-month month day-of-week)`
    }
  }
  let next: Date | null
  try {
    next = new Cron(cron, { timezone }).nextRun(new Date(from))
  } catch (error) {
    return { field: "cron", message: `cron '${cron}' is not valid: ${error instanceof Error ? error.message : error}` }
  }
  if (next === null) return { field: "cron", message: `cron '${cron}' never fires` }
  return undefined
}

/** The first fire time strictly after `after` (epoch ms), or undefined when there is none. Call after `problemOf`. */
export const nextFireAfter = (cron: string, timezone: string, after: number): number | undefined => {
  const next = new Cron(cron, { timezone }).nextRun(new Date(after))
  return next === null ? undefined : next.getTime()
}
