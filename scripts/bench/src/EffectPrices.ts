/**
 * `node dist/src/EffectPrices.js [n]`: what the Effect runtime's waiting primitives cost in CPU on this
 * machine, for work on the engine's loops (not part of `pnpm bench`). Each line runs `n` rounds of
 * "offer a ring, then wait for it" in one fiber, the wait made as the line says; the first line is the
 * bare queue, so each later line's excess over it is the price of its primitive. Measured as
 * process.cpuUsage after 2,000 warm-up rounds. A race forks a fiber per side and, at its end, merges
 * the winner's fiber references into the caller's: that, not the timer, is most of its price.
 */
import { Deferred, Effect, Fiber, Queue } from "effect"

const rounds = Number(process.argv[2] ?? 20_000)

const price = (name: string, wait: (ring: Queue.Queue<void>) => Effect.Effect<unknown>) =>
  Effect.gen(function* () {
    const ring = yield* Queue.sliding<void>(1)
    const once = Effect.zipRight(Queue.offer(ring, undefined), wait(ring))
    yield* Effect.repeatN(once, 2_000)
    const cpu0 = process.cpuUsage()
    yield* Effect.repeatN(once, rounds - 1)
    const cpu = process.cpuUsage(cpu0)
    console.log(`${name.padEnd(52)} ${((cpu.user + cpu.system) / rounds).toFixed(2).padStart(7)} µs`)
  })

await Effect.runPromise(
  Effect.gen(function* () {
    yield* price("Queue.take (the baseline)", (ring) => Queue.take(ring))
    yield* price("Effect.race(Queue.take, Effect.sleep(1 s))", (ring) =>
      Effect.race(Queue.take(ring), Effect.sleep("1 second"))
    )
    yield* price("Effect.raceAll of three (take, sleep, never)", (ring) =>
      Effect.raceAll([Queue.take(ring), Effect.sleep("1 second"), Effect.never])
    )
    yield* price("Effect.fork(Queue.take) then Fiber.join", (ring) =>
      Effect.flatMap(Effect.fork(Queue.take(ring)), Fiber.join)
    )
    yield* price("Queue.take, then a Deferred made, completed, awaited", (ring) =>
      Effect.zipRight(
        Queue.take(ring),
        Effect.flatMap(Deferred.make<number>(), (d) => Effect.zipRight(Deferred.succeed(d, 1), Deferred.await(d)))
      )
    )
    yield* price("Effect.scoped(Effect.forkScoped(Queue.take)) joined", (ring) =>
      Effect.scoped(Effect.flatMap(Effect.forkScoped(Queue.take(ring)), Fiber.join))
    )
  })
)
