/**
 * A wake-up at a time, for a loop that waits on a queue of rings: "the next ring, or `at`, whichever
 * comes first". `Effect.race(Queue.take(ring), Effect.sleep(ms))` says the same, but forks two fibers
 * and a timer for every wait, ≈ 50–80 µs of CPU here; the reactor's loop and the cancel watch wait
 * once per commit, and the deterministic simulation ran ≈ 280 such races a seed (docs/benchmarks.md).
 *
 * An alarm is one fiber for the loop's life. `set(at)` moves its target; at the target it offers one
 * ring to the loop's own queue, the queue the loop takes from anyway. A later target costs nothing
 * now (the timer wakes at its old target, sees it is early, and sleeps on); an earlier one replaces
 * the timer's fiber. Times are on the engine's clock, so TestClock drives it as it drove the sleep.
 */
import { Clock, Duration, Effect, Fiber, Queue, type Scope } from "effect"

export interface Alarm {
  /** Offers one ring to the queue at `at` (engine clock, ms), unless set again before. */
  readonly set: (at: number) => Effect.Effect<void>
}

export const make = (ring: Queue.Enqueue<void>): Effect.Effect<Alarm, never, Scope.Scope> =>
  Effect.gen(function* () {
    const scope = yield* Effect.scope
    /** When to ring; infinite: not set. */
    let target = Number.POSITIVE_INFINITY
    /** When the timer's current sleep ends; infinite: it waits for a setting. */
    let sleepingUntil = Number.POSITIVE_INFINITY
    const settings = yield* Queue.sliding<void>(1)
    // Interruptible whatever its maker's region: a layer's build is uninterruptible, and a timer that
    // inherited that could not be stopped (setting an earlier time, or closing the scope, hung on it).
    const timer = Effect.interruptible(
      Effect.gen(function* () {
        while (true) {
          if (target === Number.POSITIVE_INFINITY) {
            sleepingUntil = Number.POSITIVE_INFINITY
            yield* Queue.take(settings)
            continue
          }
          const now = yield* Clock.currentTimeMillis
          if (now >= target) {
            target = Number.POSITIVE_INFINITY
            yield* Queue.offer(ring, undefined)
            continue
          }
          sleepingUntil = target
          yield* Effect.sleep(Duration.millis(target - now))
        }
      })
    )
    let fiber = yield* Effect.forkIn(timer, scope)
    return {
      set: (at) =>
        Effect.suspend(() => {
          target = at
          if (sleepingUntil === Number.POSITIVE_INFINITY) return Queue.offer(settings, undefined)
          if (at >= sleepingUntil) return Effect.void
          // Earlier than the timer's sleep: a new timer; the old one is stopped before it could ring.
          sleepingUntil = at
          return Effect.zipRight(
            Fiber.interrupt(fiber),
            Effect.map(Effect.forkIn(timer, scope), (next) => {
              fiber = next
            })
          )
        })
    }
  })
