/**
 * The harness's reads, through the typed client of the server's own HttpApi (the client the CLI uses,
 * `HttpApiClient` over `Api.ServerApi`): answers are decoded with the schemas the server serves, so a
 * changed shape fails here by name instead of being guessed at. Plain promises for the harness's loops.
 */
import { FetchHttpClient, HttpApiClient } from "@effect/platform"
import { Api, type ThreadView, type TranscriptView } from "@orchestration/server"
import { Effect, type Either, Option } from "effect"

const run = <A, E>(base: string, f: (api: Effect.Effect.Success<ReturnType<typeof client>>) => Effect.Effect<A, E>) =>
  Effect.runPromise(client(base).pipe(Effect.flatMap(f), Effect.provide(FetchHttpClient.layer)))

const client = (base: string) => HttpApiClient.make(Api.ServerApi, { baseUrl: base })

/** An answer the server refused with a typed error (its `_tag`, e.g. NotFound), or a value. */
const either = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<Either.Either<A, E>> => Effect.either(effect)

export type EventView = typeof Api.EventView.Type
export type EffectView = typeof Api.EffectView.Type
export type ReceiptView = typeof Api.ReceiptView.Type

/** One page of the log after `after`. */
export const events = (base: string, after: number) =>
  run(base, (api) => api.events.list({ urlParams: { after, limit: 1000 } }))

/** Up to `limit` effect rows in `status` (any status when undefined). */
export const effects = (base: string, status: EffectView["status"] | undefined, limit = 1000) =>
  run(base, (api) => api.effects.list({ urlParams: status === undefined ? { limit } : { status, limit } })).then(
    (page) => page.effects
  )

/** The receipt of `commandId`, or the server's typed refusal (NotFound when it has none). */
export const receipt = (base: string, commandId: string): Promise<Either.Either<ReceiptView, unknown>> =>
  run(base, (api) => either(api.commands.receipt({ path: { commandId: encodeURIComponent(commandId) } })))

/** The thread, or undefined when the server has none. */
export const thread = (base: string, threadId: string): Promise<ThreadView | undefined> =>
  run(base, (api) =>
    api.threads.thread({ path: { threadId: encodeURIComponent(threadId) } }).pipe(
      Effect.asSome,
      Effect.catchTag("NotFound", () => Effect.succeedNone),
      Effect.map(Option.getOrUndefined)
    )
  )

/** The thread's transcript and its validation, or the server's typed refusal. */
export const transcript = (base: string, threadId: string): Promise<Either.Either<TranscriptView, unknown>> =>
  run(base, (api) => either(api.threads.transcript({ path: { threadId: encodeURIComponent(threadId) } })))

/** The triggers not deleted, each with its next fire time (`GET /v1/triggers`). */
export const triggers = (base: string) =>
  run(base, (api) => api.threads.triggers({ urlParams: {} })).then((list) => list.triggers)
