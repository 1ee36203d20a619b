/** The one source of chance in a simulation: a seeded generator (mulberry32), so a seed replays exactly. */
export interface Rng {
  /** A float in [0, 1). */
  readonly next: () => number
  /** An integer in [0, n). */
  readonly int: (n: number) => number
  readonly chance: (p: number) => boolean
  readonly pick: <A>(items: ReadonlyArray<A>) => A
}

export const make = (seed: number): Rng => {
  let a = (seed ^ 0x9e3779b9) >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (n: number) => Math.floor(next() * n)
  return { next, int, chance: (p) => next() < p, pick: (items) => items[int(items.length)]! }
}

/** An independent stream for one concern (workload, scheduling, faults), so changing one leaves the others. */
export const fork = (seed: number, stream: number): Rng => make(Math.imul(seed + 1, 0x85ebca6b) ^ (stream * 0xc2b2ae35))
