/** The one source of chance in a simulation: a seeded generator (mulberry32), so a seed replays exactly. */
import { mulberry32 } from "@orchestration/engine/testing"

export interface Rng {
  /** A float in [0, 1). */
  readonly next: () => number
  /** An integer in [0, n). */
  readonly int: (n: number) => number
  readonly chance: (p: number) => boolean
  readonly pick: <A>(items: ReadonlyArray<A>) => A
}

export const make = (seed: number): Rng => {
  const next = mulberry32(seed ^ 0x9e3779b9)
  const int = (n: number) => Math.floor(next() * n)
  return { next, int, chance: (p) => next() < p, pick: (items) => items[int(items.length)]! }
}

/** An independent stream for one concern (workload, scheduling, faults), so changing one leaves the others. */
export const fork = (seed: number, stream: number): Rng => make(Math.imul(seed + 1, 0x85ebca6b) ^ (stream * 0xc2b2ae35))
