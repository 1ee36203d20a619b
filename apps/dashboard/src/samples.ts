/**
 * The rolling window behind the charts: readings of /v1/outbox/summary taken every few seconds,
 * kept for the last minutes, and the series drawn from them. Rates come from successive readings
 * (the log head and the settled-row count only grow, except when retention deletes rows: a drop
 * reads as 0, not a negative rate).
 */
export interface Sample {
  /** Server time of the reading. */
  readonly at: number
  readonly head: number
  readonly settled: number
  /** Sum of all reactors' lag. */
  readonly lag: number
  readonly oldestPendingAgeMs: number
}

export interface Point {
  readonly at: number
  readonly value: number
}

export const windowMs = 10 * 60_000

/** Adds a reading and drops those older than the window (and any reading not newer than the last). */
export const addSample = (
  samples: ReadonlyArray<Sample>,
  sample: Sample,
  keepMs: number = windowMs
): ReadonlyArray<Sample> => {
  const last = samples.at(-1)
  if (last !== undefined && sample.at <= last.at) return samples
  return [...samples, sample].filter((s) => s.at >= sample.at - keepMs)
}

export const lagSeries = (samples: ReadonlyArray<Sample>): ReadonlyArray<Point> =>
  samples.map((s) => ({ at: s.at, value: s.lag }))

/** Per-second rate of a growing counter between successive readings. */
export const rateSeries = (samples: ReadonlyArray<Sample>, counter: (s: Sample) => number): ReadonlyArray<Point> =>
  samples.slice(1).map((s, index) => {
    const previous = samples[index]!
    const seconds = (s.at - previous.at) / 1000
    return { at: s.at, value: seconds <= 0 ? 0 : Math.max(0, counter(s) - counter(previous)) / seconds }
  })
