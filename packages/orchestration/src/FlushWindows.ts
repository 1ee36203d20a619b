/**
 * Flush windows shared by every stream on one clock: a stream with text waiting sleeps until the
 * next multiple of its window length on the clock (not `window` after its own first write), and all
 * the streams waiting for that instant are woken by ONE timer, in one step of the scheduler. Their
 * flush commands therefore reach the processor's queue before it runs again, and land in one batch:
 * one transaction and one fsync per window for all streams, where per-stream timers gave one commit
 * per flush (64 streams × 20 flushes/s were 1,280 fsyncs/s on SQLite's one connection, see
 * docs/benchmarks.md). A window still ends at most `window` after the first write it holds.
 *
 * The waiters are grouped per Clock instance, so tests on their own TestClock never share a window.
 */
import { Clock, Deferred, Duration, Effect } from "effect"

const windows = new WeakMap<Clock.Clock, Map<number, Deferred.Deferred<void>>>()

/** Waits until the current `windowMillis` window ends on the fiber's clock (one timer per window). */
export const windowEnd = (windowMillis: number): Effect.Effect<void> =>
  Effect.gen(function* () {
    const clock = yield* Effect.clock
    const fresh = yield* Deferred.make<void>()
    // One synchronous step: find this window's waiters, or open it with `fresh` and its timer.
    const { deferred, timer } = yield* Effect.sync(() => {
      const now = clock.unsafeCurrentTimeMillis()
      const end = (Math.floor(now / windowMillis) + 1) * windowMillis
      let table = windows.get(clock)
      if (table === undefined) {
        table = new Map()
        windows.set(clock, table)
      }
      const waiting = table.get(end)
      if (waiting !== undefined) return { deferred: waiting, timer: undefined }
      table.set(end, fresh)
      const opened = table
      const open = Effect.sync(() => opened.delete(end)).pipe(Effect.zipRight(Deferred.succeed(fresh, undefined)))
      return { deferred: fresh, timer: Effect.zipRight(Clock.sleep(Duration.millis(end - now)), open) }
    })
    // The timer runs on its own (a daemon), so one waiter's interruption leaves the others their window.
    if (timer !== undefined) yield* Effect.forkDaemon(timer)
    yield* Deferred.await(deferred)
  })
