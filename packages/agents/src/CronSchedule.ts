/**
 * When a trigger fires: a cron expression read in an IANA time zone, by croner (a maintained parser
 * with time-zone support; no hand-written cron here). Pure functions of their arguments, so the
 * trigger decider stays pure: the time to search from is always given (the command's `ctx.now`).
 *
 * Five fields (minute resolution) or a nickname (`@daily`, `@hourly`, ...); croner's optional seconds
 * field is refused, so a trigger starts at most one turn a minute.
 *
 * DST is decided here, not left to croner (whose answer dropped a whole day when two minutes of a
 * skipped hour matched, and fired a repeated 01:30 twice when the hour was listed): croner only finds
 * the local wall-clock times that match (the cron read in UTC, as a calendar), and this module maps
 * each to instants in the zone.
 * - A fixed hour (`0 2 * * *`, `30 1,2 * * *`, `@daily`): every match that a switch skips fires once,
 *   at the first valid minute after the gap (02:00 and 02:30 on a spring-forward night both fire at
 *   03:00, as one fire); a match that occurs twice (01:30 on a fall-back night) fires at its first
 *   occurrence only.
 * - A wildcard hour (`30 * * * *`, `*\/15 * * * *`, `@hourly`) keeps to real time, as Vixie cron
 *   does: nothing fires in the skipped hour and both passes of a repeated hour fire, so an hourly
 *   job runs every hour of elapsed time.
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
  let next: number | undefined
  try {
    // The fire time as triggers will compute it (across DST too), so "acceptable" means it fires.
    next = nextFireAfter(cron, timezone, from)
  } catch (error) {
    return { field: "cron", message: `cron '${cron}' is not valid: ${error instanceof Error ? error.message : error}` }
  }
  if (next === undefined) return { field: "cron", message: `cron '${cron}' never fires` }
  return undefined
}

const MINUTE = 60_000
/** Wider than any zone's change of offset (Apia's 24 hours in 2011) plus the largest offset (14 hours). */
const AROUND = 40 * 3_600_000

const wallClocks = new Map<string, Intl.DateTimeFormat>()
const wallClockOf = (timezone: string): Intl.DateTimeFormat => {
  let format = wallClocks.get(timezone)
  if (format === undefined) {
    format = new Intl.DateTimeFormat("en-US", {
      timeZone: timezone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric"
    })
    wallClocks.set(timezone, format)
  }
  return format
}

/** The zone's offset at `instant` in ms: the local wall clock, read as UTC, is `instant + offset`. */
const offsetAt = (timezone: string, instant: number): number => {
  const whole = Math.floor(instant / 1000) * 1000
  const field: Record<string, number> = {}
  for (const part of wallClockOf(timezone).formatToParts(new Date(whole))) {
    if (part.type !== "literal") field[part.type] = Number(part.value)
  }
  const wall = Date.UTC(field.year!, field.month! - 1, field.day!, field.hour!, field.minute!, field.second!)
  return wall - whole
}

/** The offsets the zone has within AROUND of `instant`, smallest first (one, except near a switch). */
const offsetsNear = (timezone: string, instant: number): ReadonlyArray<number> => {
  const offsets = new Set([
    offsetAt(timezone, instant - AROUND),
    offsetAt(timezone, instant),
    offsetAt(timezone, instant + AROUND)
  ])
  return [...offsets].sort((a, b) => a - b)
}

/** The instants at which the zone's wall clock shows `wall`: none in a gap, two in a repeated hour. */
const instantsAt = (timezone: string, wall: number): ReadonlyArray<number> => {
  const instants = new Set<number>()
  for (const offset of offsetsNear(timezone, wall)) {
    if (offsetAt(timezone, wall - offset) === offset) instants.add(wall - offset)
  }
  return [...instants].sort((a, b) => a - b)
}

/** The first minute whose wall clock shows `wall` or later: the end of the gap that skips `wall`. */
const gapEndAfter = (timezone: string, wall: number): number => {
  const offsets = offsetsNear(timezone, wall)
  let low = Math.floor((wall - offsets[offsets.length - 1]!) / MINUTE) // shows a time before `wall`
  let high = Math.ceil((wall - offsets[0]!) / MINUTE) // shows a time after it
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2)
    if (middle * MINUTE + offsetAt(timezone, middle * MINUTE) >= wall) high = middle
    else low = middle
  }
  return high * MINUTE
}

/** `@hourly` or an hour field starting with `*` (or croner's `?`): the schedule keeps to real time. */
const hasWildcardHour = (cron: string): boolean => {
  const trimmed = cron.trim()
  if (trimmed.startsWith("@")) return trimmed.toLowerCase() === "@hourly"
  const hour = trimmed.split(/\s+/)[1] ?? ""
  return hour.startsWith("*") || hour.startsWith("?")
}

/** The first fire time strictly after `after` (epoch ms), or undefined when there is none. Call after `problemOf`. */
export const nextFireAfter = (cron: string, timezone: string, after: number): number | undefined => {
  const calendar = new Cron(cron, { timezone: "UTC" }) // matches of the local wall clock, read as UTC
  const realTime = hasWildcardHour(cron)
  const instantsOf = (wall: number): ReadonlyArray<number> => {
    const instants = instantsAt(timezone, wall)
    if (realTime) return instants
    return instants.length === 0 ? [gapEndAfter(timezone, wall)] : [instants[0]!]
  }
  // A match whose instant is after `after` shows a wall clock later than `after` plus its smallest
  // nearby offset; a later match than `stopAfter` cannot have an instant before the best found.
  let best: number | undefined
  let stopAfter = Number.POSITIVE_INFINITY
  let match = calendar.nextRun(new Date(after + offsetsNear(timezone, after)[0]! - MINUTE))
  while (match !== null && match.getTime() <= stopAfter) {
    for (const instant of instantsOf(match.getTime())) {
      if (instant > after && (best === undefined || instant < best)) {
        best = instant
        const offsets = offsetsNear(timezone, best)
        stopAfter = best + offsets[offsets.length - 1]!
      }
    }
    match = calendar.nextRun(match)
  }
  return best
}
