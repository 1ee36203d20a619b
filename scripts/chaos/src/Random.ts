import { mulberry32 } from "@orchestration/engine/testing"

/** A seeded generator (mulberry32): `--seed` replays the same schedule of kills, faults and inputs. */
export const seeded = (seed: number) => {
  const next = mulberry32(seed)
  return {
    next,
    int: (min: number, max: number) => min + Math.floor(next() * (max - min + 1)),
    pick: <A>(items: ReadonlyArray<A>): A => items[Math.floor(next() * items.length)]!,
    chance: (p: number) => next() < p
  }
}
export type Random = ReturnType<typeof seeded>
