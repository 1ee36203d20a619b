/**
 * The storage guard's probe: how much room the data volume has. Below the floor the engine refuses
 * new client work and reactors stop claiming, so queued work parks instead of starting turns it
 * cannot record. Replaceable, so tests can report a full disk without filling one.
 */
import { Clock, Context, Duration, Effect, Layer } from "effect"
import { statfs } from "node:fs/promises"

export interface SpaceReport {
  readonly freeBytes: number
  readonly floorBytes: number
  readonly belowFloor: boolean
}

export interface FreeSpaceShape {
  readonly check: Effect.Effect<SpaceReport>
}

/** Default: no probe configured, never below a floor. */
export class FreeSpace extends Context.Reference<FreeSpace>()("orchestration/FreeSpace", {
  defaultValue: (): FreeSpaceShape => ({
    check: Effect.succeed({ freeBytes: Number.MAX_SAFE_INTEGER, floorBytes: 0, belowFloor: false })
  })
}) {}

/**
 * The real probe: statfs on the data directory, re-read at most every `cacheFor` (default 250 ms) so
 * admitting a command costs no syscall. A failing probe reports 0 free (fail closed).
 */
export const layer = (options: {
  readonly directory: string
  readonly floorBytes: number
  readonly cacheFor?: Duration.DurationInput
}) =>
  Layer.sync(FreeSpace, () => {
    const cacheMs = Duration.toMillis(options.cacheFor ?? "250 millis")
    let last: { at: number; report: SpaceReport } | undefined
    const read = Effect.tryPromise(() => statfs(options.directory)).pipe(
      Effect.map((s) => s.bavail * s.bsize),
      Effect.tapError((error) => Effect.logError("free-space probe failed; treating the volume as full", error)),
      Effect.orElseSucceed(() => 0),
      Effect.map(
        (freeBytes): SpaceReport => ({
          freeBytes,
          floorBytes: options.floorBytes,
          belowFloor: freeBytes < options.floorBytes
        })
      )
    )
    return {
      check: Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        if (last !== undefined && now - last.at < cacheMs) return last.report
        const report = yield* read
        last = { at: now, report }
        return report
      })
    }
  })

/** A probe a test controls: set `free` to move across the floor. */
export const controllable = (floorBytes: number, initialFree: number) => {
  const state = { free: initialFree }
  const probe = Layer.succeed(FreeSpace, {
    check: Effect.sync(() => ({ freeBytes: state.free, floorBytes, belowFloor: state.free < floorBytes }))
  })
  return { state, layer: probe }
}
