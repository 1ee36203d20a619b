/**
 * PostgreSQL sessions the engine keeps for the life of the process, outside the pool: the one that
 * holds this node id's advisory lock, and the one that LISTENs for other processes' commits. Both
 * are only worth anything while their connection lives, so each watches its connection and says
 * when it is lost: a pooled connection that dies takes its lock or its LISTEN with it unnoticed.
 */
import { SqlError } from "@effect/sql/SqlError"
import { Cause, Effect, Exit, type Scope, Stream } from "effect"
import pg from "pg"
import { NodeIdInUse } from "../Errors.js"
import * as LoopRounds from "../LoopRounds.js"

export interface SessionOptions {
  readonly url: string
  readonly applicationName: string
}

interface Session {
  readonly client: pg.Client
  /** Resolves when the connection ends or fails, for whatever reason. */
  readonly lost: Promise<unknown>
}

const open = async (options: SessionOptions): Promise<Session> => {
  const client = new pg.Client({ connectionString: options.url, application_name: options.applicationName })
  // A listener on "error" is required: an unhandled one would crash the process.
  const lost = new Promise<unknown>((resolve) => {
    client.on("error", resolve)
    client.on("end", () => resolve(undefined))
  })
  try {
    await client.connect()
  } catch (error) {
    await client.end().catch(() => undefined) // swallow-ok: the connect error is the one reported
    throw error
  }
  return { client, lost }
}

const close = (session: Session) => Effect.promise(() => session.client.end().catch(() => undefined)) // swallow-ok: closing a session that may already be gone

/**
 * A lock taken on a session of its own: `lost` answers when that session ends (and the lock with it),
 * `close` ends it. What `holdWith` needs of a lock, so its loop can be driven without a database.
 */
export interface HeldLock {
  readonly lost: Effect.Effect<unknown>
  readonly close: Effect.Effect<void>
}

/** Opens a session and tries the lock; undefined (and the session closed) when another holds it. */
const tryLock = (options: SessionOptions, key: string): Effect.Effect<HeldLock | undefined, SqlError> =>
  Effect.tryPromise({
    try: async () => {
      const session = await open(options)
      const rows = await session.client.query<{ held: boolean }>("SELECT pg_try_advisory_lock(hashtext($1)) AS held", [
        key
      ])
      if (rows.rows[0]?.held === true) return { lost: Effect.promise(() => session.lost), close: close(session) }
      await session.client.end().catch(() => undefined) // swallow-ok: the answer (not held) is already known
      return undefined
    },
    catch: (cause) => new SqlError({ cause, message: "could not open the session for the node id lock" })
  })

const inUse = (nodeId: string) =>
  new NodeIdInUse({
    nodeId,
    message: `node id '${nodeId}' is held by another live process on this database; give each process its own NODE_ID`
  })

/**
 * Holds the advisory lock `key` for node `nodeId` on a session of its own for the scope's lifetime.
 * When that session is lost (PostgreSQL releases the lock with it), the lock is taken again at once,
 * retrying while the database is unreachable. If another process took it meanwhile, two processes
 * now run under one node id and this one must stop: `onLost` is told (the store's default ends the
 * process).
 */
export const holdLock = (
  options: SessionOptions,
  key: string,
  nodeId: string,
  onLost: (error: NodeIdInUse) => Effect.Effect<void>
): Effect.Effect<void, NodeIdInUse | SqlError, Scope.Scope> => holdWith(tryLock(options, key), nodeId, onLost)

/** Longest wait between re-takes that died: a bug that repeats logs its stack at most this often. */
const DEFECT_BACKOFF_MAX_MS = 5_000

/**
 * Takes the lock again until it is answered (held, or held by another). A refusal (the database
 * unreachable) is retried every 500 ms for as long as it lasts. So is a defect (a bug in the driver
 * or the query), logged with its stack and backing off from 500 ms to 5 s: ending the loop on it
 * left the node running without its lock, and it never learnt that another process took its id.
 */
const retake = (take: Effect.Effect<HeldLock | undefined, SqlError>) =>
  Effect.gen(function* () {
    let defects = 0
    while (true) {
      // Shutdown still ends this: an interrupted fiber runs no recovery handler, Effect.exit's included.
      const exit = yield* Effect.exit(take)
      if (Exit.isSuccess(exit)) return exit.value
      if (Cause.isFailure(exit.cause) && !Cause.isDie(exit.cause)) {
        yield* Effect.logWarning("node id lock: database unreachable; retrying", Cause.squash(exit.cause))
        yield* Effect.sleep("500 millis")
      } else {
        defects++
        yield* LoopRounds.logFailedRound("node id lock: taking it again died; retrying")(exit.cause)
        yield* Effect.sleep(Math.min(500 * 2 ** (defects - 1), DEFECT_BACKOFF_MAX_MS))
      }
    }
  })

/** `holdLock`'s loop over any way of taking the lock (`take`: held, or undefined when another holds it). */
export const holdWith = (
  take: Effect.Effect<HeldLock | undefined, SqlError>,
  nodeId: string,
  onLost: (error: NodeIdInUse) => Effect.Effect<void>
): Effect.Effect<void, NodeIdInUse | SqlError, Scope.Scope> =>
  Effect.gen(function* () {
    const first = yield* take
    if (first === undefined) return yield* inUse(nodeId)
    let current = first
    yield* Effect.addFinalizer(() => Effect.suspend(() => current.close))
    yield* Effect.forkScoped(
      Effect.gen(function* () {
        while (true) {
          const cause = yield* current.lost
          yield* Effect.logError(`the session holding node id '${nodeId}' was lost; taking the lock again`, cause)
          const next = yield* retake(take)
          if (next === undefined) return yield* onLost(inUse(nodeId))
          current = next
          yield* Effect.logWarning(`node id '${nodeId}' lock taken again`)
        }
      })
    )
  })

/**
 * LISTEN on `channel` on a session of its own: every notification's payload, and one `undefined`
 * each time the LISTEN is (re-)established, since commits made while no session listened rang
 * nobody and readers must look again. Fails when the session is lost, so the caller can re-open it.
 */
export const listen = (options: SessionOptions, channel: string): Stream.Stream<string | undefined, SqlError> =>
  Stream.asyncPush<string | undefined, SqlError>((emit) =>
    Effect.gen(function* () {
      const session = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: () => open(options),
          catch: (cause) => new SqlError({ cause, message: "could not open the LISTEN session" })
        }),
        close
      )
      session.client.on("notification", (message) => {
        if (message.channel === channel) emit.single(message.payload ?? "")
      })
      void session.lost.then((cause) => emit.fail(new SqlError({ cause, message: "the LISTEN session was lost" })))
      yield* Effect.tryPromise({
        try: () => session.client.query(`LISTEN ${pg.escapeIdentifier(channel)}`),
        catch: (cause) => new SqlError({ cause, message: "could not LISTEN" })
      })
      emit.single(undefined)
    })
  )
