/**
 * Whether the store takes writes, as /health reports it. A client write the store refused (disk
 * full, I/O error, read-only: not the floor, which is a policy) marks it not writable; from then a
 * probe write runs every `probeEvery` until one lands, so /health comes back by itself once space
 * returns. Waiting for a client's write instead would keep a node that a load balancer took out of
 * rotation (because of that 503) out for ever: no client write would reach it. A client write that
 * lands marks the store writable too.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import { LoopRounds, WriteProbe } from "@orchestration/engine"
import { Context, type Duration, Effect, Layer } from "effect"

export interface StoreWritabilityShape {
  readonly writable: Effect.Effect<boolean>
  /** The store refused a client's write. */
  readonly refused: Effect.Effect<void>
  /** A client's write committed. */
  readonly landed: Effect.Effect<void>
}

export class StoreWritability extends Context.Tag("server/StoreWritability")<
  StoreWritability,
  StoreWritabilityShape
>() {}

export const make = (options: { readonly probeEvery: Duration.DurationInput }) =>
  Effect.gen(function* () {
    const store = yield* Effect.context<SqlClient>()
    let writable = true
    const probe = Effect.gen(function* () {
      if (writable) return
      const landed = yield* WriteProbe.probeWrite.pipe(
        Effect.as(true),
        // swallow-ok: a refused probe is the expected answer while the store is full; logged, and the next probe asks again.
        Effect.catchAll((failure) =>
          Effect.as(
            Effect.logWarning("the store still refuses writes; probing again").pipe(
              Effect.annotateLogs({ reason: failure.reason, code: failure.code })
            ),
            false
          )
        ),
        Effect.provide(store)
      )
      if (landed && !writable) {
        writable = true
        yield* Effect.logInfo("the store takes writes again: a probe write landed")
      }
    })
    // swallow-ok: a probe that fails or dies is logged and the next one asks again; one that died
    // ended the probing, and /health said "unavailable" for good.
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.zipRight(Effect.sleep(options.probeEvery), probe).pipe(
          LoopRounds.survive("the write probe failed; probing again")
        )
      )
    )
    return StoreWritability.of({
      writable: Effect.sync(() => writable),
      refused: Effect.sync(() => {
        writable = false
      }),
      landed: Effect.sync(() => {
        writable = true
      })
    })
  })

export const layer = (options: { readonly probeEvery: Duration.DurationInput }) =>
  Layer.scoped(StoreWritability, make(options))
