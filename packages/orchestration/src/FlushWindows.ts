/**
 * Flush windows shared by every stream of one engine: a stream with text waiting sleeps until the
 * next multiple of its window length on the engine's clock (not `window` after its own first write),
 * and all the streams waiting for that instant are woken by ONE timer, in one step of the scheduler.
 * Their flush commands therefore reach the processor's queue before it runs again, and land in one
 * batch: one transaction and one fsync per window for all streams, where per-stream timers gave one
 * commit per flush (64 streams × 20 flushes/s were 1,280 fsyncs/s on SQLite's one connection, see
 * docs/benchmarks.md). A window still ends at most `window` after the first write it holds.
 *
 * A stream's END joins its window too (`Ticket.ending`): its last text waits for the window the
 * other streams' text waits for, instead of being sent alone at once, so streams that end close
 * together end in one commit, and their settlements follow together (a stream's end sent alone was
 * a transaction of its own, then its settlement another: at 64 streams the last tokens of the last
 * streams to end waited 0.3–0.9 s behind that queue). The wait never depends on the clock alone: a
 * window whose every waiter is an ending stream (or that only ending streams are left in) opens at
 * once, so a stream alone ends at once, and streams that all end together end together, whether or
 * not the clock moves (TestClock).
 *
 * A service of the engine (its layer provides it): the windows group the streams of the engine
 * whose processor they share, on the clock the engine was built with, and their timers end with it.
 */
import { Context, Deferred, Duration, Effect, Exit, Layer, Queue, type Scope } from "effect"

/** One waiter's place in one window. Each method is one synchronous step. */
export interface Ticket {
  /** This waiter no longer waits (woken by something else, interrupted): the window may open early. */
  readonly leave: () => void
  /**
   * This waiter's stream has ended: it waits only for the others. The window opens early (after one
   * turn, see openIfOnlyEnding) when every waiter left is ending.
   */
  readonly ending: () => void
}

export interface FlushWindowsShape {
  /**
   * Waits until the current `windowMillis` window ends (one timer per window end). `ending`: the
   * waiter is a stream's end (`Ticket.ending`), so the window may open early.
   */
  readonly windowEnd: (windowMillis: number, ending?: boolean) => Effect.Effect<void>
  /**
   * Completes `wake` when the current `windowMillis` window ends, without waiting: a stream that may
   * also be woken by something else (its buffer reaching the flush size) waits on `wake` alone,
   * instead of racing two fibers for every window. The ticket says when the waiter leaves or ends.
   */
  readonly join: (windowMillis: number, wake: Deferred.Deferred<void>) => Effect.Effect<Ticket>
}

export class FlushWindows extends Context.Tag("orchestration/FlushWindows")<FlushWindows, FlushWindowsShape>() {}

interface Waiter {
  readonly wake: Deferred.Deferred<void>
  ending: boolean
}

interface Window {
  readonly end: number
  readonly waiters: Set<Waiter>
  /** An early opening is on its way (openIfOnlyEnding). */
  early: boolean
}

export const make: Effect.Effect<FlushWindowsShape, never, Scope.Scope> = Effect.gen(function* () {
  const scope = yield* Effect.scope
  const clock = yield* Effect.clock
  /** The open windows, by the instant each ends. */
  const windows = new Map<number, Window>()
  /** Opens a window (once): its waiters are woken together. A window opened early leaves its timer nothing to do. */
  const open = (window: Window) => {
    if (windows.get(window.end) !== window) return
    windows.delete(window.end)
    for (const waiter of window.waiters) Deferred.unsafeDone(waiter.wake, Exit.void)
    window.waiters.clear()
  }
  const onlyEnding = (window: Window) => {
    if (window.waiters.size === 0) return false
    for (const waiter of window.waiters) if (!waiter.ending) return false
    return true
  }
  /**
   * Only ending streams wait: nobody else's text will come to share the commit, so the window opens
   * early. Not in this step but after a zero sleep on the engine's clock (one turn of the event loop;
   * at once under TestClock, at the next instant in the simulator): streams whose last tokens are
   * all overdue end in one timer phase, one timer callback after the other, and a commit sent from
   * the first callback would run (synchronously, on SQLite) before the next callback ran, one commit
   * per stream (seen at 64 streams started together: the last tokens of the last streams ≈ 240 ms
   * late, one fsync apart). After the turn every stream that ended meanwhile is in the window too.
   */
  const earlyOpenings = yield* Queue.unbounded<Window>()
  const openIfOnlyEnding = (window: Window) => {
    if (window.early || !onlyEnding(window)) return
    window.early = true
    Queue.unsafeOffer(earlyOpenings, window)
  }
  yield* Effect.forkScoped(
    Effect.forever(
      Effect.flatMap(Queue.take(earlyOpenings), (window) =>
        Effect.zipRight(
          clock.sleep(Duration.zero),
          Effect.sync(() => {
            window.early = false
            if (onlyEnding(window)) open(window)
          })
        )
      )
    )
  )
  const join = (windowMillis: number, wake: Deferred.Deferred<void>) =>
    Effect.suspend(() => {
      // One synchronous step: join this window's waiters, or open it with its timer.
      const now = clock.unsafeCurrentTimeMillis()
      const end = (Math.floor(now / windowMillis) + 1) * windowMillis
      const waiter: Waiter = { wake, ending: false }
      let window = windows.get(end)
      const timer =
        window === undefined
          ? (w: Window) =>
              // The timer runs in the engine's scope, so one waiter's interruption leaves the others their window.
              Effect.forkIn(
                Effect.zipRight(
                  clock.sleep(Duration.millis(end - now)),
                  Effect.sync(() => open(w))
                ),
                scope
              )
          : undefined
      if (window === undefined) {
        window = { end, waiters: new Set(), early: false }
        windows.set(end, window)
      }
      const joined = window
      joined.waiters.add(waiter)
      const ticket: Ticket = {
        leave: () => {
          if (joined.waiters.delete(waiter)) openIfOnlyEnding(joined)
        },
        ending: () => {
          if (!joined.waiters.has(waiter)) return
          waiter.ending = true
          openIfOnlyEnding(joined)
        }
      }
      return timer === undefined ? Effect.succeed(ticket) : Effect.as(timer(joined), ticket)
    })
  return {
    join,
    windowEnd: (windowMillis, ending = false) =>
      Effect.flatMap(Deferred.make<void>(), (wake) =>
        Effect.flatMap(join(windowMillis, wake), (ticket) => {
          if (ending) ticket.ending()
          return Effect.onInterrupt(Deferred.await(wake), () => Effect.sync(ticket.leave))
        })
      )
  }
})

export const layer: Layer.Layer<FlushWindows> = Layer.scoped(FlushWindows, make)
