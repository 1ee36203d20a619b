import { Deferred, Effect } from "effect"

/**
 * Outcomes may be seen before the client asks for them; both orders resolve the same way. Shared by the
 * SQLite and PostgreSQL end-to-end runs, which follow `counter.effect-done` events into `complete`.
 */
export const makeCompletions = () => {
  const waiting = new Map<string, Deferred.Deferred<void>>()
  const early = new Set<string>()
  return {
    complete: (effectId: string) =>
      Effect.suspend(() => {
        const waiter = waiting.get(effectId)
        if (waiter === undefined) {
          early.add(effectId)
          return Effect.void
        }
        waiting.delete(effectId)
        return Deferred.succeed(waiter, undefined)
      }),
    await: (effectId: string) =>
      Effect.suspend(() => {
        if (early.delete(effectId)) return Effect.void
        return Effect.flatMap(Deferred.make<void>(), (d) => {
          // The follower may have run between the check above and here: look again before waiting.
          if (early.delete(effectId)) return Effect.void
          waiting.set(effectId, d)
          return Deferred.await(d)
        })
      })
  }
}
