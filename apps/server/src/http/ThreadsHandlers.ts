/** The thread routes and the trigger list: served by the domain's ThreadViews, 404 when the domain has none. */
import { HttpApiBuilder } from "@effect/platform"
import { SqlClient } from "@effect/sql/SqlClient"
import { Engine, type StorageFailure } from "@orchestration/engine"
import { Effect, Option, Stream } from "effect"
import { InvalidRequest, NotFound, fromStorageFailure } from "../ApiErrors.js"
import { ServerState } from "../ServerState.js"
import * as ThreadStream from "../ThreadStream.js"
import { ThreadViews, type ThreadViewsShape } from "../ThreadViews.js"
import { ServerApi } from "./Api.js"
import { heartbeatEvery } from "./EventsHandlers.js"
import { sseResponse, sseText } from "./Sse.js"

/** The thread list's page size when the client names none. */
export const defaultThreadPage = 50

/** The trigger list's length when the client names none. */
export const defaultTriggerPage = 100

/** How many pending approvals are listed when the client names no limit. */
export const defaultApprovalPage = 100

/** A domain without stream rules: the thread's events, never a live step. */
const eventsOnly: ThreadStream.ThreadStreamRules = {
  aggregateType: "thread",
  transition: () => undefined,
  stepEffectId: (step) => `${step.turnId}#${step.step}`
}

export const ThreadsLive = HttpApiBuilder.group(ServerApi, "threads", (handlers) =>
  Effect.gen(function* () {
    const views = yield* Effect.serviceOption(ThreadViews)
    const engine = yield* Engine.Engine
    const sql = yield* SqlClient
    const state = yield* ServerState
    const noThreads = () => new NotFound({ message: "this server's domain has no threads" })
    const missing = (threadId: string) => new NotFound({ message: `no thread '${threadId}'` })
    const find = <A>(
      threadId: string,
      read: (v: ThreadViewsShape) => Effect.Effect<Option.Option<A>, StorageFailure>
    ) =>
      Option.match(views, {
        onNone: () => Effect.fail(noThreads()),
        onSome: (v) =>
          read(v).pipe(
            Effect.mapError(fromStorageFailure),
            Effect.flatMap(Option.match({ onNone: () => Effect.fail(missing(threadId)), onSome: Effect.succeed }))
          )
      })
    return handlers
      .handle("list", ({ urlParams }) => {
        const list = Option.getOrUndefined(views)?.listThreads
        return list === undefined
          ? Effect.fail(noThreads())
          : list({
              limit: urlParams.limit ?? defaultThreadPage,
              after: urlParams.after,
              status: urlParams.status,
              order: urlParams.order
            }).pipe(Effect.mapError(fromStorageFailure))
      })
      .handle("triggers", ({ urlParams }) => {
        const list = Option.getOrUndefined(views)?.listTriggers
        return list === undefined
          ? Effect.fail(new NotFound({ message: "this server's domain has no triggers" }))
          : list({ limit: urlParams.limit ?? defaultTriggerPage }).pipe(Effect.mapError(fromStorageFailure))
      })
      .handleRaw("stream", ({ path, request, urlParams }) =>
        Effect.gen(function* () {
          const from = ThreadStream.requestedPosition(request.headers["last-event-id"], urlParams.after)
          if ("problem" in from) {
            return yield* new InvalidRequest({
              message: from.problem,
              issues: [{ path: [from.path], message: from.problem }]
            })
          }
          // The thread must exist now; a stream of a thread that never will would wait forever.
          yield* find(path.threadId, (v) => v.getThread(path.threadId))
          const rules = Option.getOrThrow(views).streamRules ?? eventsOnly
          const messages = ThreadStream.follow({ engine, sql, rules, threadId: path.threadId, from }).pipe(
            Stream.map(ThreadStream.formatMessage)
          )
          return sseResponse(sseText(messages, heartbeatEvery), { what: "thread stream", draining: state.draining })
        })
      )
      .handle("thread", ({ path }) => find(path.threadId, (v) => v.getThread(path.threadId)))
      .handle("transcript", ({ path }) => find(path.threadId, (v) => v.getTranscript(path.threadId)))
      .handle("approvals", ({ urlParams }) => {
        const list = Option.getOrUndefined(views)?.listApprovals
        return list === undefined
          ? Effect.fail(new NotFound({ message: "this server's domain has no approvals" }))
          : list({ limit: urlParams.limit ?? defaultApprovalPage, threadId: urlParams.threadId }).pipe(
              Effect.mapError(fromStorageFailure)
            )
      })
  })
)
