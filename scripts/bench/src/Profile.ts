/**
 * How big each measurement is. `quick` keeps the whole run under a minute on a shared 2-core machine,
 * so its figures are noisier, it reconciles 1,000 rows instead of 10,000 and 100,000 (the summary's
 * reconcile_10k_ms is then scaled from it, and says so) and loads 10⁴/10⁵ rows instead of 10⁵/10⁶.
 */
export interface Profile {
  readonly name: "full" | "quick"
  readonly rounds: number
  /** Commands per floor run (one transaction each; the batched floor runs four times as many). */
  readonly floorOps: number
  readonly fsyncOps: number
  /** Commands per engine dispatch run, by group commit setting. */
  readonly dispatchOps: { readonly off: number; readonly on: number }
  readonly clients: ReadonlyArray<number>
  readonly endToEndOps: number
  /** Sequential single-client end-to-end runs, which also give the pickup latency. */
  readonly pickupOps: number
  readonly reconcileRows: ReadonlyArray<number>
  /** Rounds of the smallest reconcile size (each a fresh process); the larger sizes run once. */
  readonly reconcileRounds: number
  readonly scaleRows: ReadonlyArray<number>
  readonly scaleOps: number
  /** Interleaved rounds over the loaded scale stores (each round a fresh process per size). */
  readonly scaleRounds: number
  /** Peers run in the first `peerRounds` rounds only: they are slow, and their spread is wide anyway. */
  readonly peerRounds: number
  readonly workflowOps: { readonly 1: number; readonly 16: number }
  readonly emmettOps: { readonly 1: number; readonly 16: number }
}

/** Each setting as [full, quick]. */
const settings: { readonly [K in Exclude<keyof Profile, "name">]: readonly [Profile[K], Profile[K]] } = {
  rounds: [5, 3],
  floorOps: [3_000, 600],
  fsyncOps: [2_000, 300],
  dispatchOps: [
    { off: 1_000, on: 2_500 },
    { off: 150, on: 400 }
  ],
  clients: [
    [1, 16, 256],
    [1, 16, 256]
  ],
  endToEndOps: [1_000, 200],
  pickupOps: [300, 100],
  reconcileRows: [[10_000, 100_000], [1_000]],
  reconcileRounds: [3, 1],
  scaleRows: [
    [100_000, 1_000_000],
    [10_000, 100_000]
  ],
  scaleOps: [10_000, 1_500],
  scaleRounds: [5, 3],
  peerRounds: [3, 1],
  workflowOps: [
    { 1: 200, 16: 480 },
    { 1: 40, 16: 96 }
  ],
  emmettOps: [
    { 1: 400, 16: 64 },
    { 1: 100, 16: 16 }
  ]
}

const column = (name: Profile["name"], index: 0 | 1): Profile => ({
  name,
  ...(Object.fromEntries(Object.entries(settings).map(([key, values]) => [key, values[index]])) as Omit<
    Profile,
    "name"
  >)
})

export const full = column("full", 0)
export const quick = column("quick", 1)
