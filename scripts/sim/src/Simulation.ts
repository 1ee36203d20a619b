/**
 * One seed, one simulated history: the real engine, reactors, reconcile and agents domain on a real
 * SQLite file, under a seeded scheduler and clock, with the world, the model and the disk's refusals
 * simulated. A crash abandons the runtime between two scheduler steps (no finalizer runs), closes the
 * connection (SQLite rolls back the open transaction) and boots a fresh engine on the same file and
 * world. Once the clients are done, faults and crashes stop and the system must come to rest.
 */
import { Agents, McpServers, World } from "@orchestration/agents"
import { Boot, Engine, SqliteStore } from "@orchestration/engine"
import { Effect, type Fiber, Layer, Logger, LogLevel, Random, Scope, Stream } from "effect"
import { globalValue } from "effect/GlobalValue"
import Database from "better-sqlite3"
import { copyFileSync, existsSync, mkdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Client from "./Client.js"
import * as Invariants from "./Invariants.js"
import * as Reduction from "./Reduction.js"
import * as Rng from "./Rng.js"
import * as SimFaults from "./SimFaults.js"
import * as SimProvider from "./SimProvider.js"
import { epoch, SimRuntime } from "./SimRuntime.js"
import * as SimWorld from "./SimWorld.js"
import { Trace } from "./Trace.js"
import type { Violation } from "./Violation.js"
import * as Workload from "./Workload.js"

export interface SimOptions {
  readonly size?: Workload.WorkloadSize
  /** Scheduler steps within which a crash is drawn (the window restarts at each boot). */
  readonly crashWindow?: number
  /** Simulated time after which a run that has not come to rest fails. */
  readonly maxSimMs?: number
  /** What of the seed's draws the run leaves out (Reduction.ts; Shrink.ts finds one). */
  readonly reduction?: Reduction.Reduction
  /**
   * A check of the world after every scheduler step, for tests of the simulator itself: a description
   * ends the run as a `probe` violation.
   */
  readonly probe?: (world: SimWorld.SimWorldState) => string | undefined
}

export interface SeedResult {
  readonly seed: number
  readonly steps: number
  readonly crashes: number
  readonly faults: number
  readonly simMs: number
  readonly digest: string
  readonly failure?: Violation & { readonly tail: ReadonlyArray<string> }
}

const baseDir = () => {
  const dir = join(existsSync("/dev/shm") ? "/dev/shm" : tmpdir(), `orch-sim-${process.pid}`)
  mkdirSync(dir, { recursive: true })
  return dir
}

/**
 * Every connection the engine opens, seen at its first statement: a crash can land after the store
 * opened its file and took its lock but before its layer finished, and the crash must still close it
 * (as the kernel closes a killed process's files), or the next boot finds the store locked.
 */
const connections = new Set<Database.Database>()
const prepare = Database.prototype.prepare
Database.prototype.prepare = function (this: Database.Database, source: string) {
  connections.add(this)
  return prepare.call(this, source)
} as typeof prepare

const closeConnections = () => {
  for (const db of connections) if (db.open) db.close()
  connections.clear()
}

/**
 * Effect keeps every root fiber (each `runFork`, each `forkDaemon`) in one global set until it ends.
 * A crash abandons fibers that never end, so each incarnation's fibers, with the whole engine they
 * hold, stayed reachable for the life of the process (2 GB after 1,000 seeds, and every major
 * collection marked all of it). When an incarnation ends (a crash, or the seed's end) the simulator
 * forgets the roots it added, as the kernel frees a killed process's memory; nothing can run them again.
 */
const fiberRoots = (): Set<Fiber.RuntimeFiber<unknown, unknown>> =>
  globalValue<{ readonly roots: Set<Fiber.RuntimeFiber<unknown, unknown>> }>(
    Symbol.for("effect/FiberScope/Global"),
    () => {
      throw new Error("effect's global fiber scope is not where the simulator expects it")
    }
  ).roots
const forgetRootsSince = (before: ReadonlySet<Fiber.RuntimeFiber<unknown, unknown>>) => {
  const roots = fiberRoots()
  for (const fiber of roots) if (!before.has(fiber)) roots.delete(fiber)
}

const domain = Agents.domain({})
const quietLogs = Logger.withMinimumLogLevel(LogLevel.None)
/** No tracer: spans (one per SQL statement in @effect/sql) are observability, and nothing in the engine reads them. */
const untraced = <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.withTracerEnabled(self, false)

/** Runs `program` on the simulated runtime until it ends; for setup only (no crash, no check). */
const runToEnd = <A, E>(runtime: SimRuntime, program: Effect.Effect<A, E>) => {
  const fiber = Effect.runFork(program.pipe(Effect.withClock(runtime.clock), quietLogs), { scheduler: runtime })
  while (fiber.unsafePoll() === null) if (!runtime.step()) throw new Error("setup never finished")
  return fiber.unsafePoll()!
}

/** Removes this process's store files (the template and any seed left by a failure). */
export const cleanup = () => {
  closeConnections()
  rmSync(join(existsSync("/dev/shm") ? "/dev/shm" : tmpdir(), `orch-sim-${process.pid}`), {
    recursive: true,
    force: true
  })
  template = undefined
}

let template: string | undefined
/** A migrated, empty store, made once per process and copied for each seed (migrating costs more than a run). */
const templateFile = () => {
  if (template !== undefined) return template
  const file = join(baseDir(), "template.db")
  rmSync(file, { force: true })
  const runtime = new SimRuntime(Rng.make(0))
  const exit = runToEnd(
    runtime,
    Effect.scoped(
      Layer.build(
        Engine.layer({ aggregates: domain.aggregates, projections: domain.projections }).pipe(
          Layer.provideMerge(SqliteStore.layer({ filename: file, synchronous: "NORMAL" }))
        )
      )
    )
  )
  if (exit._tag === "Failure") throw new Error(`template store: ${String(exit.cause)}`)
  closeConnections()
  template = file
  return file
}

/** A reader following the log: each event must come right after the previous one (no skip). */
const followLog = (follower: { last: number }, report: (violation: Violation) => void) =>
  Effect.gen(function* () {
    const engine = yield* Engine.Engine
    for (;;) {
      yield* Effect.either(
        Stream.runForEach(engine.followEvents({ after: follower.last }), (event) =>
          Effect.sync(() => {
            if (event.sequence !== follower.last + 1)
              report({ invariant: "reader-skipped", detail: `the reader saw ${event.sequence} after ${follower.last}` })
            follower.last = event.sequence
          })
        )
      )
      yield* Effect.sleep(1_000)
    }
  })

/**
 * Runs the scheduler until the boot's program ends, the seed's crash point comes (unless faults have
 * stopped), or the run is over; answers whether the process "crashed" (a crash or a refused boot).
 */
const drive = (
  runtime: SimRuntime,
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  state: { readonly calm: boolean; readonly finished: boolean; readonly violation: Violation | undefined },
  trace: Trace,
  report: (violation: Violation) => void,
  crashAt: number,
  maxSimMs: number,
  afterStep: (() => void) | undefined
): boolean => {
  let crashed = false
  for (;;) {
    afterStep?.()
    if (state.violation !== undefined || state.finished) break
    const exit = fiber.unsafePoll()
    if (exit !== null) {
      if (exit._tag === "Failure") {
        // A boot refused by the disk ends like a crash: the operator (here, the loop) starts it again.
        trace.add("boot-failed", String(exit.cause).split("\n")[0]!.slice(0, 120))
        crashed = true
      }
      break
    }
    if (!state.calm && runtime.steps >= crashAt) {
      crashed = true
      break
    }
    if (runtime.now - epoch > maxSimMs) {
      report({ invariant: "not-quiescent", detail: `no rest after ${maxSimMs} ms of simulated time` })
      break
    }
    if (!runtime.step()) {
      report({ invariant: "not-quiescent", detail: "nothing can run and no timer is set (deadlock)" })
      break
    }
  }
  return crashed
}

export const defaultCrashWindow = 1_500

/** The clients' plans a seed draws, before any reduction. */
export const seedPlans = (seed: number, size: Workload.WorkloadSize = Workload.defaultSize) =>
  Workload.generate(Rng.fork(seed, 2), size)

export const runSeed = (seed: number, options: SimOptions = {}): SeedResult => {
  const size = options.size ?? Workload.defaultSize
  const crashWindow = options.reduction?.crashWindow ?? options.crashWindow ?? defaultCrashWindow
  const maxSimMs = options.maxSimMs ?? 6 * 3_600_000
  const runtime = new SimRuntime(Rng.fork(seed, 1))
  const trace = new Trace(() => runtime.now - epoch)
  const reduction = options.reduction ?? Reduction.none
  const plans = Reduction.applyTo(seedPlans(seed, size), reduction)
  const chaos = Rng.fork(seed, 3)
  // Drawn whatever the reduction says, so the rest of the chaos stream is the seed's.
  const drawnFaultRate = 0.002 + chaos.next() * 0.03
  const faultRate = reduction.noFaults ? 0 : drawnFaultRate
  const maxCrashes = Math.min(chaos.chance(0.9) ? 1 + chaos.int(3) : 0, reduction.maxCrashes ?? Infinity)
  const outageRate = reduction.noOutages ? 0 : 0.05
  const world = SimWorld.emptyState()
  const memory = Client.emptyMemory()
  const faults: SimFaults.FaultLog = { hits: new Map(), count: 0 }
  const follower = { last: 0 }
  const state = { calm: false, finished: false, violation: undefined as Violation | undefined }
  const report = (violation: Violation) => {
    if (state.violation === undefined) {
      state.violation = violation
      trace.add("violation", `${violation.invariant}: ${violation.detail}`)
    }
  }
  const file = join(baseDir(), `seed-${seed}.db`)
  const removeFiles = () => {
    for (const suffix of ["", "-wal", "-shm", "-journal"]) rmSync(file + suffix, { force: true })
  }
  removeFiles()
  copyFileSync(templateFile(), file)

  const worldRng = Rng.fork(seed, 4)
  const providerRng = Rng.fork(seed, 5)
  const clientRng = Rng.fork(seed, 6)
  const services = Layer.mergeAll(
    Layer.succeed(World.World, SimWorld.make(world, worldRng, runtime, trace)),
    SimProvider.layer(providerRng, trace, () => (state.calm ? 0 : outageRate)),
    // No MCP servers: the simulated world has none to call.
    McpServers.none
  )
  const faultLayer = SimFaults.layer(chaos, trace, () => (state.calm ? 0 : faultRate), faults)

  const stackFor = (boot: number) =>
    Boot.layer({ reactors: domain.reactors, retention: false, worker: { nodeId: "sim", ownerId: `sim:${boot}` } }).pipe(
      Layer.provideMerge(
        Layer.merge(
          Engine.layer({ aggregates: domain.aggregates, projections: domain.projections, activation: "manual" }),
          services
        )
      ),
      Layer.provideMerge(SqliteStore.layer({ filename: file, synchronous: "NORMAL" })),
      Layer.provide(faultLayer)
    )

  const follow = followLog(follower, report)

  const afterBoot = (boot: number) =>
    Effect.gen(function* () {
      const bootReport = yield* Boot.BootReport
      trace.add("boot", `${boot} ${JSON.stringify(bootReport.reconciled)}`)
      const durable = yield* Invariants.durable(memory, world)
      if (durable !== undefined) return report(durable)
      yield* Effect.fork(follow)
      yield* Effect.forEach(plans, (plan) => Client.run(plan, memory, faults, clientRng, trace, report), {
        concurrency: "unbounded",
        discard: true
      })
      state.calm = true
      trace.add("calm", `refusals=${memory.refusals}`)
      let rest = false
      for (let i = 0; i < 2_000 && !rest; i++) {
        yield* Effect.sleep(5_000)
        rest = yield* Invariants.quiet
      }
      if (!rest)
        return report({
          invariant: "not-quiescent",
          detail: `still busy long after faults stopped: ${yield* Invariants.unrest}`
        })
      const engine = yield* Engine.Engine
      const head = (yield* engine.stats).head
      for (let i = 0; i < 10 && follower.last < head; i++) yield* Effect.sleep(1_000)
      if (follower.last !== head)
        return report({
          invariant: "reader-skipped",
          detail: `the reader ended at ${follower.last}, the log at ${head}`
        })
      const final = yield* Invariants.durable(memory, world)
      if (final !== undefined) return report(final)
      const end = yield* Invariants.atQuiescence
      if (end.violation !== undefined) return report(end.violation)
      trace.add("quiescent", `head=${head} ${end.summary}`)
      state.finished = true
    })

  const bootProgram = (boot: number) =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(stackFor(boot), scope)
      yield* afterBoot(boot).pipe(Effect.provide(context))
    })

  let crashes = 0
  for (let boot = 0; state.violation === undefined && !state.finished; boot++) {
    if (boot > 50) {
      report({ invariant: "not-quiescent", detail: "the engine failed to boot fifty times" })
      break
    }
    const crashAt = crashes < maxCrashes ? runtime.steps + 1 + chaos.int(crashWindow) : Infinity
    const rootsBefore = new Set(fiberRoots())
    const fiber = Effect.runFork(
      bootProgram(boot).pipe(
        Effect.withClock(runtime.clock),
        Effect.withRandom(Random.make(seed)),
        quietLogs,
        untraced
      ),
      { scheduler: runtime }
    )
    const probe = options.probe
    const afterStep =
      probe === undefined
        ? undefined
        : () => {
            const detail = probe(world)
            if (detail !== undefined) report({ invariant: "probe", detail })
          }
    const crashed = drive(runtime, fiber, state, trace, report, crashAt, maxSimMs, afterStep)
    runtime.abandon()
    forgetRootsSince(rootsBefore)
    closeConnections()
    if (crashed && state.violation === undefined && !state.finished) {
      crashes++
      trace.add("crash", `after step ${runtime.steps}`)
      runtime.now += 1_000 + chaos.int(30_000)
    }
  }
  removeFiles()
  const v = state.violation
  return {
    seed,
    steps: runtime.steps,
    crashes,
    faults: faults.count,
    simMs: runtime.now - epoch,
    digest: trace.digest(),
    ...(v === undefined ? {} : { failure: { ...v, tail: trace.tail(25) } })
  }
}
