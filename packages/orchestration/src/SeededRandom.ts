/**
 * The one seeded generator (mulberry32) of fault points, the chaos harness and the simulator: a float
 * in [0, 1) a call, the same sequence for the same seed, so a seed replays a run exactly.
 */
export const mulberry32 = (seed: number): (() => number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
