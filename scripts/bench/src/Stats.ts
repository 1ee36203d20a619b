import { Effect } from "effect"

/** Small numeric helpers: percentiles of latencies and min/median/max across rounds. */

export interface Spread {
  readonly min: number
  readonly median: number
  readonly max: number
}

/** Nearest-rank percentile of an unsorted sample; NaN for an empty one. */
export const percentile = (values: ReadonlyArray<number>, p: number): number => {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[rank]!
}

export const spread = (values: ReadonlyArray<number>): Spread => {
  const finite = values.filter((v) => Number.isFinite(v))
  if (finite.length === 0) return { min: Number.NaN, median: Number.NaN, max: Number.NaN }
  const sorted = [...finite].sort((a, b) => a - b)
  // Median of an even count: the mean of the two middle rounds.
  const mid = sorted.length / 2
  const median = sorted.length % 2 === 1 ? sorted[Math.floor(mid)]! : (sorted[mid - 1]! + sorted[mid]!) / 2
  return { min: sorted[0]!, median, max: sorted[sorted.length - 1]! }
}

/** A throughput run: operations, wall time and per-operation latencies (ms). */
export interface RunResult {
  readonly ops: number
  readonly seconds: number
  readonly latenciesMs: ReadonlyArray<number>
}

export const perSecond = (run: RunResult) => run.ops / run.seconds

export const nowMs = () => performance.now()

/**
 * Closed loop: `clients` loops that each start the next operation as soon as their last one answered,
 * until `total` were started. `op` gets the operation index and the client index.
 */
export const closedLoop = async (
  clients: number,
  total: number,
  op: (i: number, client: number) => Promise<void>
): Promise<RunResult> => {
  const latencies: Array<number> = []
  let next = 0
  const client = async (_: unknown, c: number) => {
    while (next < total) {
      const i = next++
      const t0 = nowMs()
      await op(i, c)
      latencies.push(nowMs() - t0)
    }
  }
  const start = nowMs()
  await Promise.all(Array.from({ length: clients }, client))
  return { ops: total, seconds: (nowMs() - start) / 1000, latenciesMs: latencies }
}

/** The same closed loop as an Effect, so engine clients are fibers and no Promise sits on the path. */
export const closedLoopEffect = <E, R>(
  clients: number,
  total: number,
  op: (i: number, client: number) => Effect.Effect<unknown, E, R>
) =>
  Effect.suspend(() => {
    const latencies: Array<number> = []
    let next = 0
    const client = (c: number): Effect.Effect<void, E, R> =>
      Effect.suspend(() => {
        if (next >= total) return Effect.void
        const i = next++
        const t0 = nowMs()
        return op(i, c).pipe(
          Effect.zipRight(Effect.sync(() => latencies.push(nowMs() - t0))),
          Effect.zipRight(client(c))
        )
      })
    const start = nowMs()
    return Effect.forEach(
      Array.from({ length: clients }, (_, c) => c),
      client,
      { concurrency: "unbounded", discard: true }
    ).pipe(Effect.map((): RunResult => ({ ops: total, seconds: (nowMs() - start) / 1000, latenciesMs: latencies })))
  })

export const fmt = (value: number, digits = 0): string =>
  Number.isFinite(value)
    ? value.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : "n/a"
