/**
 * The commit horizon's pure rule (src/storage/CommitHorizon.ts), given/when/then: an observation
 * (newest sequence L, xid R taken after its snapshot) is trusted once a later snapshot's xmin is
 * above R, and one observation waits at a time. The PostgreSQL interleavings are in
 * test/postgres/commit-horizon.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Either, Fiber, Option } from "effect"
import * as CommitHorizon from "../src/storage/CommitHorizon.js"

describe("commit horizon", () => {
  it("trusts nothing it observed until every xid below the observation's has ended", () => {
    // given an observation of L = 20 with R = 100
    const waiting = CommitHorizon.step(CommitHorizon.initial, 90n, { newest: 20, after: 100n })
    assert.deepStrictEqual(waiting, { trusted: 0, waiting: { newest: 20, after: 100n } })
    // when a later snapshot still has xid 100 or below running, then nothing is trusted
    assert.strictEqual(CommitHorizon.step(waiting, 100n, undefined).trusted, 0)
    // when every xid up to 100 has ended, then L is trusted
    assert.deepStrictEqual(CommitHorizon.step(waiting, 101n, undefined), { trusted: 20, waiting: undefined })
  })

  it("keeps the waiting observation under steady writes instead of replacing it, so it is trusted eventually", () => {
    const first = CommitHorizon.step(CommitHorizon.initial, 90n, { newest: 20, after: 100n })
    // a newer observation arrives while the first still waits: the first stays
    const second = CommitHorizon.step(first, 95n, { newest: 30, after: 110n })
    assert.deepStrictEqual(second.waiting, { newest: 20, after: 100n })
    assert.isFalse(CommitHorizon.wantsObservation(second))
    // the first is trusted, and the same statement's observation starts waiting
    const third = CommitHorizon.step(second, 105n, { newest: 40, after: 120n })
    assert.deepStrictEqual(third, { trusted: 20, waiting: { newest: 40, after: 120n } })
  })

  it("never moves backwards and waits for nothing when nothing new was seen", () => {
    const trusted = { trusted: 50, waiting: undefined }
    assert.deepStrictEqual(CommitHorizon.step(trusted, 200n, { newest: 50, after: 300n }), trusted)
    assert.deepStrictEqual(CommitHorizon.step(trusted, 200n, { newest: 40, after: 300n }), trusted)
    assert.isTrue(CommitHorizon.wantsObservation(trusted))
  })

  it("reads an observation row: no R (the statement's transaction already had an xid) observes nothing", () => {
    const row = { newest: "20", writers: [], after: null }
    assert.deepStrictEqual(CommitHorizon.fromRow(CommitHorizon.initial, row), CommitHorizon.initial)
    assert.deepStrictEqual(CommitHorizon.fromRow(CommitHorizon.initial, { ...row, after: "100" }).waiting, {
      newest: 20,
      after: 100n
    })
  })

  it("knows rows seen above the horizon with nothing waiting on them need an observation", () => {
    // given 20 waiting, a statement without an xid that trusts it while seeing 25
    const trusted = CommitHorizon.fromRow(
      { trusted: 0, waiting: { newest: 20, after: 100n } },
      { newest: 25, writers: [], after: null }
    )
    // then 21..25 are neither trusted nor waited on: only an observation can trust them
    assert.deepStrictEqual(trusted, { trusted: 20, waiting: undefined })
    assert.isTrue(CommitHorizon.unobserved(trusted, 25))
    assert.isFalse(CommitHorizon.unobserved(trusted, 20))
    // while something waits, its own look follows: nothing is unobserved
    assert.isFalse(CommitHorizon.unobserved({ trusted: 0, waiting: { newest: 20, after: 100n } }, 25))
  })

  it("trusts the waiting observation once no writer of the schema older than R runs, across xid wraparound", () => {
    const waiting = { trusted: 0, waiting: { newest: 20, after: 100n } }
    // a writer with xid 99 still runs: nothing is trusted; one with 100 (R itself) or later does not count
    assert.strictEqual(
      CommitHorizon.fromRow(waiting, { newest: 25, writers: ["99", "100", "150"], after: null }).trusted,
      0
    )
    assert.strictEqual(CommitHorizon.fromRow(waiting, { newest: 25, writers: ["100", "150"], after: null }).trusted, 20)
    // R = 2^32 + 5 (epoch 1, xid 5): a writer at 32-bit xid 4294967290 (epoch 0) is older; 7 is not
    const wrapped = { trusted: 0, waiting: { newest: 20, after: 2n ** 32n + 5n } }
    assert.strictEqual(CommitHorizon.fromRow(wrapped, { newest: 25, writers: ["4294967290"], after: null }).trusted, 0)
    assert.strictEqual(CommitHorizon.fromRow(wrapped, { newest: 25, writers: ["7"], after: null }).trusted, 20)
  })

  it("keeps what this process's alone commits trusted while a look was in flight, and the look's own news", () => {
    // given a look that started at trusted 10 and answers trusted 12 with 20 waiting
    const looked = { trusted: 12, waiting: { newest: 20, after: 100n } }
    // when an alone commit moved the process's horizon to 15 meanwhile, then 15 stands and 20 still waits
    assert.deepStrictEqual(CommitHorizon.afterLook({ trusted: 15, waiting: undefined }, looked), {
      trusted: 15,
      waiting: { newest: 20, after: 100n }
    })
    // when the commit moved it to 25, past what the look saw waiting, then nothing is left to wait for
    assert.deepStrictEqual(CommitHorizon.afterLook({ trusted: 25, waiting: undefined }, looked), {
      trusted: 25,
      waiting: undefined
    })
    // when nothing moved it, then the look's answer is the horizon
    assert.deepStrictEqual(CommitHorizon.afterLook({ trusted: 10, waiting: undefined }, looked), looked)
  })
})

describe("one look", () => {
  // A scripted observation statement: what it sees, and whether an observing one fails.
  const scripted = (db: { newest: number; writers: Array<string>; failObserve: boolean }) => {
    let xid = 100n
    return (observe: boolean) =>
      observe && db.failObserve
        ? Effect.fail("connection lost" as const)
        : Effect.succeed<CommitHorizon.ObservationRow>({
            newest: db.newest,
            writers: [...db.writers],
            after: observe ? String(xid++) : null
          })
  }

  it.effect("covers every row committed before it: one that trusts what waited observes the newer rows", () =>
    Effect.gen(function* () {
      // given row 10 observed while writer 50 (an older xid) still runs, then row 12 committed
      const db = { newest: 10, writers: ["50"], failObserve: false }
      const statement = scripted(db)
      const waiting = yield* CommitHorizon.look(CommitHorizon.initial, statement)
      assert.deepStrictEqual([waiting.trusted, waiting.waiting?.newest], [0, 10])
      db.newest = 12
      db.writers = []
      // when the next look trusts 10, then it observes 12 (waiting on it, or trusting it)
      const after = yield* CommitHorizon.look(waiting, statement)
      assert.isTrue(after.trusted >= 12 || after.waiting?.newest === 12)
    })
  )

  it.effect("stopped half-way, it answers nothing: no horizon that trusted what waited without seeing newer rows", () =>
    Effect.gen(function* () {
      const db = { newest: 10, writers: ["50"], failObserve: false }
      const statement = scripted(db)
      const waiting = yield* CommitHorizon.look(CommitHorizon.initial, statement)
      // given row 12 committed and the writer 50 ended, when the look's observing statement fails
      db.newest = 12
      db.writers = []
      db.failObserve = true
      const stopped = yield* Effect.either(CommitHorizon.look(waiting, statement))
      // then it fails whole (PostgresStore keeps the horizon it had, still waiting on 10)
      assert.deepStrictEqual(stopped, Either.left("connection lost" as const))
    })
  )
})

/**
 * A table's looks under CommitHorizon.serialLooks, with a look that stops until the test lets it
 * finish (or fail, look number `failing`): `started` counts looks run, `horizon` is the number of the
 * newest look that finished, which is what a caller reads once it has its permit's outcome.
 */
const gatedLooks = (failing?: number) =>
  Effect.gen(function* () {
    const gates: Array<Deferred.Deferred<void>> = []
    const begun: Array<Deferred.Deferred<void>> = []
    for (let i = 0; i < 10; i++) {
      gates.push(yield* Deferred.make<void>())
      begun.push(yield* Deferred.make<void>())
    }
    const state = { started: 0, horizon: 0 }
    const serial = CommitHorizon.serialLooks(
      Effect.suspend(() => {
        const number = ++state.started
        return Effect.zipRight(
          Effect.zipRight(Deferred.succeed(begun[number - 1]!, undefined), Deferred.await(gates[number - 1]!)),
          number === failing
            ? Effect.fail("connection lost" as const)
            : Effect.sync(() => {
                state.horizon = number
              })
        )
      })
    )
    /** A caller, forked; it has arrived (counted the looks started) once this returns. */
    const caller = Effect.gen(function* () {
      const fiber = yield* Effect.fork(Effect.either(Effect.map(serial, () => state.horizon)))
      yield* Effect.yieldNow()
      return fiber
    })
    return {
      state,
      caller,
      /** Whether a caller has its result once every fiber that can move has moved. */
      done: (fiber: Fiber.RuntimeFiber<unknown, unknown>) =>
        Effect.gen(function* () {
          for (let i = 0; i < 100; i++) yield* Effect.yieldNow()
          return Option.isSome(yield* Fiber.poll(fiber))
        }),
      /** Waits until look `n` (from 1) has begun, then lets it finish. */
      finish: (n: number) => Effect.zipRight(Deferred.await(begun[n - 1]!), Deferred.succeed(gates[n - 1]!, undefined)),
      begun: (n: number) => Deferred.await(begun[n - 1]!)
    }
  })

describe("serial looks", () => {
  it.effect("callers queued behind a look share the one look that starts after they arrived", () =>
    Effect.gen(function* () {
      const looks = yield* gatedLooks()
      // given a look in flight
      const first = yield* looks.caller
      yield* looks.begun(1)
      // when six callers arrive while it runs, and it finishes
      const queued: Array<Fiber.RuntimeFiber<Either.Either<number, "connection lost">>> = []
      for (let i = 0; i < 6; i++) queued.push(yield* looks.caller)
      yield* looks.finish(1)
      assert.deepStrictEqual(yield* Fiber.join(first), Either.right(1))
      // then one more look serves all six
      yield* looks.finish(2)
      for (const fiber of queued) assert.isTrue(yield* looks.done(fiber))
      for (const fiber of queued) assert.deepStrictEqual(yield* Fiber.join(fiber), Either.right(2))
      assert.strictEqual(looks.state.started, 2)
    })
  )

  it.effect("a caller never gets the result of a look that started before it arrived", () =>
    Effect.gen(function* () {
      const looks = yield* gatedLooks()
      // given a look in flight (its MAX(sequence) may predate a commit the next caller was hinted of)
      const first = yield* looks.caller
      yield* looks.begun(1)
      // when a caller arrives now, and that look finishes
      const late = yield* looks.caller
      yield* looks.finish(1)
      assert.deepStrictEqual(yield* Fiber.join(first), Either.right(1))
      // then the late caller runs a look of its own, and gets that look's result
      assert.isFalse(yield* looks.done(late))
      yield* looks.finish(2)
      assert.deepStrictEqual(yield* Fiber.join(late), Either.right(2))
      assert.strictEqual(looks.state.started, 2)
    })
  )

  it.effect("a failed look serves nobody: a caller queued behind it looks itself", () =>
    Effect.gen(function* () {
      const looks = yield* gatedLooks(2)
      const first = yield* looks.caller
      yield* looks.begun(1)
      // given two callers that arrived during look 1; the first of them runs look 2, which fails
      const failed = yield* looks.caller
      const next = yield* looks.caller
      yield* looks.finish(1)
      yield* looks.finish(2)
      assert.deepStrictEqual(yield* Fiber.join(first), Either.right(1))
      assert.deepStrictEqual(yield* Fiber.join(failed), Either.left("connection lost" as const))
      // then the other runs look 3 rather than reading what look 1 left
      assert.isFalse(yield* looks.done(next))
      yield* looks.finish(3)
      assert.deepStrictEqual(yield* Fiber.join(next), Either.right(3))
    })
  )
})
