/**
 * Named instants where the process kills itself with SIGKILL, for crash tests and the chaos harness.
 * Enabled only by configuration (the FAULT_POINTS environment variable, read once at start by the
 * process's configuration, e.g. the server's Config.ts, and provided as this service), never by a
 * request; when it is not provided or unset every `hit` is a no-op.
 *
 *   FAULT_POINTS=reactor.after-perform:kind=tool.execute:nth=1,dispatch.after-commit:p=0.05:seed=7
 *
 * Filters: `kind=` (effect kind), `nth=` (fire on the nth matching hit), `p=` with `seed=` (fire with
 * that probability, reproducibly). `delay=<ms>` makes a rule hold the process at the point for that
 * long instead of killing it, so a test can observe a phase that is otherwise too short to catch
 * (`reconcile.mid:delay=60000` keeps the server starting).
 */
import { Context, Duration, Effect } from "effect"
import { mulberry32 } from "./SeededRandom.js"

export const faultPointNames = [
  "dispatch.before-commit",
  "dispatch.after-commit",
  "reactor.after-claim",
  "reactor.after-perform",
  "reactor.after-settle",
  "reconcile.mid",
  /** After a stream chunk's flush committed (StreamIngest), mid-stream: `kind=` is the effect's kind. */
  "stream.after-flush"
] as const
export type FaultPointName = (typeof faultPointNames)[number]

export interface FaultPointsShape {
  readonly enabled: boolean
  readonly hit: (point: FaultPointName, attributes?: { readonly kind?: string }) => Effect.Effect<void>
}

interface Rule {
  readonly point: FaultPointName
  readonly kind: string | undefined
  readonly nth: number | undefined
  readonly probability: number | undefined
  readonly delayMs: number | undefined
  hits: number
  random: () => number
}

const filterNames = ["kind", "nth", "p", "seed", "delay"]

export const parse = (spec: string): ReadonlyArray<Rule> =>
  spec
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((entry) => {
      const [point, ...filters] = entry.split(":")
      if (!faultPointNames.includes(point as FaultPointName)) {
        throw new Error(`FAULT_POINTS: unknown point '${point}' (known: ${faultPointNames.join(", ")})`)
      }
      const options = new Map(
        filters.map((f) => {
          const [k, v] = f.split("=")
          if (!filterNames.includes(k!))
            throw new Error(`FAULT_POINTS: unknown filter '${k}' in '${entry}' (known: ${filterNames.join(", ")})`)
          return [k!, v ?? ""] as const
        })
      )
      const number = (key: string) => {
        const raw = options.get(key)
        if (raw === undefined) return undefined
        const n = Number(raw)
        if (!Number.isFinite(n)) throw new Error(`FAULT_POINTS: '${key}=${raw}' is not a number in '${entry}'`)
        return n
      }
      return {
        point: point as FaultPointName,
        kind: options.get("kind"),
        nth: number("nth"),
        probability: number("p"),
        delayMs: number("delay"),
        hits: 0,
        // The same seed fires at the same hits.
        random: mulberry32(number("seed") ?? 1)
      }
    })

/** Whether a rule fires on this hit (and counts the hit). Pure apart from the rule's own counter. */
export const fires = (rule: Rule, point: FaultPointName, kind: string | undefined): boolean => {
  if (rule.point !== point) return false
  if (rule.kind !== undefined && rule.kind !== kind) return false
  rule.hits++
  if (rule.nth !== undefined && rule.hits !== rule.nth) return false
  if (rule.probability !== undefined && rule.random() >= rule.probability) return false
  return true
}

export const fromSpec = (spec: string | undefined, onFire: (point: FaultPointName) => void): FaultPointsShape => {
  if (spec === undefined || spec.trim() === "") return { enabled: false, hit: () => Effect.void }
  const rules = parse(spec)
  return {
    enabled: true,
    hit: (point, attributes) =>
      Effect.suspend(() => {
        const fired = rules.find((rule) => fires(rule, point, attributes?.kind))
        if (fired === undefined) return Effect.void
        if (fired.delayMs === undefined) return Effect.sync(() => onFire(point))
        process.stderr.write(`fault point ${point} fired: holding for ${fired.delayMs} ms\n`)
        return Effect.sleep(Duration.millis(fired.delayMs))
      })
  }
}

const killSelf = (point: FaultPointName) => {
  process.stderr.write(`fault point ${point} fired: SIGKILL\n`)
  process.kill(process.pid, "SIGKILL")
}

/** The fault points of this process from its FAULT_POINTS spec: a point that fires SIGKILLs the process. */
export const forProcess = (spec: string | undefined): FaultPointsShape => fromSpec(spec, killSelf)

export class FaultPoints extends Context.Reference<FaultPoints>()("orchestration/FaultPoints", {
  defaultValue: (): FaultPointsShape => fromSpec(undefined, killSelf)
}) {}
