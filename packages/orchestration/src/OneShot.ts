/**
 * A result set once and awaited by any number of fibers: what `Deferred` offers, for the engine's
 * per-command and per-performance answers. A Deferred costs ≈ 12 µs of CPU more to make, complete and
 * await than this (docs/benchmarks.md, "Issues 19 and 20, third session"): each one is built by
 * spreading the runtime's commit prototype into a fresh object. Every command and every performance
 * of an effect makes one, so the difference is a few percent of an operation.
 *
 * `await` suspends with `Effect.async`; a waiter that is interrupted removes itself. `complete` keeps
 * the first result and wakes every waiter with it; later calls change nothing.
 */
import { Effect, type Exit } from "effect"

export class OneShot<A, E = never> {
  private result: Exit.Exit<A, E> | undefined = undefined
  private waiters: Array<(result: Exit.Exit<A, E>) => void> = []

  /** Whether a result was set. */
  get isDone(): boolean {
    return this.result !== undefined
  }

  /** Sets the result (the first call wins) and wakes every waiter; true when this call set it. */
  complete(result: Exit.Exit<A, E>): boolean {
    if (this.result !== undefined) return false
    this.result = result
    const waiters = this.waiters
    this.waiters = []
    for (const wake of waiters) wake(result)
    return true
  }

  /** The result, once set. */
  readonly await: Effect.Effect<A, E> = Effect.async<A, E>((resume) => {
    if (this.result !== undefined) return resume(this.result)
    this.waiters.push(resume)
    return Effect.sync(() => {
      const index = this.waiters.indexOf(resume)
      if (index >= 0) this.waiters.splice(index, 1)
    })
  })
}
