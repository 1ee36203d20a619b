/**
 * The simulated machine: a seeded `Scheduler` that runs one ready fiber task at a time in an order
 * the seed decides, and a `Clock` whose time moves only when no fiber is ready (to the next timer).
 * Nothing here touches the event loop, so a run is a pure function of its seed. A crash is
 * `abandon`: the ready tasks and timers are dropped, so no fiber ever runs again and no finalizer runs.
 */
import { Clock, Duration, Effect, type Scheduler } from "effect"
import type { Rng } from "./Rng.js"

interface Timer {
  readonly due: number
  readonly id: number
  readonly fire: () => void
}

/** Start of simulated time: 2026-01-01T00:00:00Z. */
export const epoch = 1_767_225_600_000

export class SimRuntime implements Scheduler.Scheduler {
  now = epoch
  steps = 0
  private ready: Array<() => void> = []
  private timers: Array<Timer> = []
  private nextTimerId = 0
  /** Operations a fiber runs before it must give way; drawn per seed (small values interleave more). */
  private readonly opsBeforeYield: number

  constructor(private readonly rng: Rng) {
    this.opsBeforeYield = rng.pick([32, 128, 512, 2048])
  }

  scheduleTask(task: () => void, _priority: number) {
    this.ready.push(task)
  }

  shouldYield(fiber: { readonly currentOpCount: number }): number | false {
    return fiber.currentOpCount > this.opsBeforeYield ? 0 : false
  }

  /** Runs one step: a ready task picked by the seed, else the earliest timers. False when nothing is left. */
  step(): boolean {
    if (this.ready.length > 0) {
      const index = this.rng.int(this.ready.length)
      const task = this.ready[index]!
      this.ready[index] = this.ready[this.ready.length - 1]!
      this.ready.pop()
      this.steps++
      task()
      return true
    }
    if (this.timers.length === 0) return false
    let first = 0
    for (let i = 1; i < this.timers.length; i++) {
      const t = this.timers[i]!
      const f = this.timers[first]!
      if (t.due < f.due || (t.due === f.due && t.id < f.id)) first = i
    }
    const timer = this.timers[first]!
    this.timers.splice(first, 1)
    if (timer.due > this.now) this.now = timer.due
    timer.fire()
    return true
  }

  /** The crash: every ready task and timer is forgotten, so the fibers of this incarnation never run again. */
  abandon() {
    this.ready = []
    this.timers = []
  }

  private addTimer(due: number, fire: () => void): number {
    const id = this.nextTimerId++
    this.timers.push({ due, id, fire })
    return id
  }

  private cancelTimer(id: number) {
    const index = this.timers.findIndex((t) => t.id === id)
    if (index >= 0) this.timers.splice(index, 1)
  }

  readonly clock: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => this.now,
    currentTimeMillis: Effect.sync(() => this.now),
    unsafeCurrentTimeNanos: () => BigInt(this.now) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(this.now) * 1_000_000n),
    sleep: (duration: Duration.Duration) =>
      Effect.async<void>((resume) => {
        const id = this.addTimer(this.now + Math.max(0, Duration.toMillis(duration)), () => resume(Effect.void))
        return Effect.sync(() => this.cancelTimer(id))
      })
  }
}
