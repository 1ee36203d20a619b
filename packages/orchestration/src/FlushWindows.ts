/**
 * Flush windows shared by every stream of one engine: a stream with text waiting sleeps until the
 * next multiple of its window length on the engine's clock (not `window` after its own first write),
 * and all the streams waiting for that instant are woken by ONE timer, in one step of the scheduler.
 * Their flush commands therefore reach the processor's queue before it runs again, and land in one
 * batch: one transaction and one fsync per window for all streams, where per-stream timers gave one
 * commit per flush (64 streams × 20 flushes/s were 1,280 fsyncs/s on SQLite's one connection, see
 * docs/benchmarks.md). A window still ends at most `window` after the first write it holds.
 *
 * A service of the engine (its layer provides it): the windows group the streams of the engine
 * whose processor they share, on the clock the engine was built with, and their timers end with it.
 */
import { Context, Deferred, Duration, Effect, Exit, Layer, type Scope } from "effect"

export interface FlushWindowsShape {
  /** Waits until the current `windowMillis` window ends (one timer per window end). */
  readonly windowEnd: (windowMillis: number) => Effect.Effect<void>
  /**
   * Completes `wake` when the current `windowMillis` window ends, without waiting: a stream that may
   * also be woken by something else (its buffer reaching the flush size) waits on `wake` alone,
   * instead of racing two fibers for every window.
   */
  readonly join: (windowMillis: number, wake: Deferred.Deferred<void>) => Effect.Effect<void>
}

export class FlushWindows extends Context.Tag("orchestration/FlushWindows")<FlushWindows, FlushWindowsShape>() {}

export const make: Effect.Effect<FlushWindowsShape, never, Scope.Scope> = Effect.gen(function* () {
  const scope = yield* Effect.scope
  const clock = yield* Effect.clock
  /** The waiters of each window, by the instant it ends. */
  const windows = new Map<number, Array<Deferred.Deferred<void>>>()
  const join = (windowMillis: number, wake: Deferred.Deferred<void>) =>
    Effect.suspend(() => {
      // One synchronous step: join this window's waiters, or open it with its timer.
      const now = clock.unsafeCurrentTimeMillis()
      const end = (Math.floor(now / windowMillis) + 1) * windowMillis
      const waiting = windows.get(end)
      if (waiting !== undefined) {
        waiting.push(wake)
        return Effect.void
      }
      const waiters = [wake]
      windows.set(end, waiters)
      const open = Effect.sync(() => {
        windows.delete(end)
        for (const waiter of waiters) Deferred.unsafeDone(waiter, Exit.void)
      })
      // The timer runs in the engine's scope, so one waiter's interruption leaves the others their window.
      return Effect.asVoid(Effect.forkIn(Effect.zipRight(clock.sleep(Duration.millis(end - now)), open), scope))
    })
  return {
    join,
    windowEnd: (windowMillis) =>
      Effect.flatMap(Deferred.make<void>(), (wake) => Effect.zipRight(join(windowMillis, wake), Deferred.await(wake)))
  }
})

export const layer: Layer.Layer<FlushWindows> = Layer.scoped(FlushWindows, make)
