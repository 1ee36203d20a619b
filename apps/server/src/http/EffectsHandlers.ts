/**
 * The operator's view of the outbox and its actions. Retry and cancel are internal settlement
 * commands through the front door (so they are idempotent and in the log), aimed at the attempt
 * the operator saw: the default id `operator:<action>:<effectId>#<attempts>` makes a repeated click
 * the same command. Release and fail act on a quarantined row (engine Quarantine.ts): release
 * dispatches its parked settlement again, fail ends it with the operator's reason.
 */
import { HttpApiBuilder, type HttpApiGroup } from "@effect/platform"
import type { HttpServerRequest } from "@effect/platform/HttpServerRequest"
import { SqlClient } from "@effect/sql/SqlClient"
import { CommandId, EffectOutcomes, type Engine, Outbox, Quarantine, StorageErrors } from "@orchestration/engine"
import { Effect, type Layer, ParseResult, Schema } from "effect"
import { fromDispatchError, InvalidRequest, NotFound, storageUnavailable } from "../ApiErrors.js"
import type { ServerMetrics } from "../Metrics.js"
import type { StoreWritability } from "../StoreWritability.js"
import { FailQuarantinedBody, OperatorBody, ServerApi } from "./Api.js"
import * as EdgeDispatch from "./EdgeDispatch.js"
import { readJsonBody } from "./RequestBody.js"

const invalid = (message: string) => new InvalidRequest({ message, issues: [] })

export const EffectsLive: Layer.Layer<HttpApiGroup.ApiGroup<"orchestration", "effects">, never, Engine.Engine | ServerMetrics | StoreWritability | SqlClient> = HttpApiBuilder.group(ServerApi, "effects", (handlers) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const dispatch = yield* EdgeDispatch.make
    const find = (effectId: string) =>
      Outbox.find(effectId).pipe(
        Effect.mapError((e) => storageUnavailable(StorageErrors.toStorageFailure("read effect")(e))),
        Effect.flatMap((row) => (row === undefined ? Effect.fail(new NotFound({ message: `no effect '${effectId}'` })) : Effect.succeed(row))),
        Effect.provideService(SqlClient, sql)
      )

    /**
     * A typed operator body, or InvalidRequest naming what is wrong. `quiet`: the issues name the
     * field and the rule, never the value (a free-text field may hold anything, of any length).
     */
    const operatorBody = <A, I>(request: HttpServerRequest, schema: Schema.Schema<A, I>, shape: string, optional: boolean, quiet = false) =>
      Effect.gen(function* () {
        const raw = yield* readJsonBody(request, { optional, invalid })
        return yield* Schema.decodeUnknown(schema, { onExcessProperty: "error" })(raw ?? {}).pipe(
          Effect.mapError((error) =>
            new InvalidRequest({
              message: `the body of this operator action is ${shape}`,
              issues: ParseResult.ArrayFormatter.formatErrorSync(error).map((i) => ({
                path: i.path.map(String),
                message: quiet ? (i._tag === "Unexpected" ? "is not allowed" : `must match ${shape}`) : i.message
              }))
            })
          )
        )
      })

    const release = (effectId: string) =>
      Effect.gen(function* () {
        yield* find(effectId)
        return yield* Quarantine.release(effectId).pipe(
          Effect.catchTags({
            StorageFailure: (failure) => Effect.fail(storageUnavailable(failure)),
            InvalidCommand: (error) => Effect.fail(fromDispatchError(error)),
            CommandIdConflict: (error) => Effect.fail(fromDispatchError(error)),
            CommandRejected: (error) => Effect.fail(fromDispatchError(error)),
            EngineUnavailable: (error) => Effect.fail(fromDispatchError(error)),
            AggregateUnavailable: (error) => Effect.fail(fromDispatchError(error)),
            CommandDefect: (error) => Effect.fail(fromDispatchError(error))
          }),
          Effect.provideService(SqlClient, sql),
          Effect.annotateLogs({ effectId, action: "release" })
        )
      })

    const fail = (effectId: string, request: HttpServerRequest) =>
      Effect.gen(function* () {
        const body = yield* operatorBody(request, FailQuarantinedBody, "{ reason } (1 to 500 characters)", false, true)
        yield* find(effectId)
        return yield* Quarantine.fail(effectId, body.reason).pipe(
          Effect.catchTag("StorageFailure", (failure) => Effect.fail(storageUnavailable(failure))),
          Effect.provideService(SqlClient, sql),
          Effect.annotateLogs({ effectId, action: "fail" })
        )
      })

    const operate = (action: "retry" | "cancel", effectId: string, request: HttpServerRequest) =>
      Effect.gen(function* () {
        const body = yield* operatorBody(request, OperatorBody, "{ commandId? }", true)
        // A chosen id follows the client rules, except that the default's own prefix is allowed.
        if (body.commandId !== undefined && !body.commandId.startsWith("operator:")) {
          const problem = CommandId.commandIdProblem(body.commandId, "client")
          if (problem !== undefined) return yield* invalid(problem)
        }
        const row = yield* find(effectId)
        return yield* dispatch({
          type: action === "retry" ? "effect.retry" : "effect.cancel",
          commandId: body.commandId ?? EffectOutcomes.operatorId(action, row.effectId, row.attempts),
          effectId: row.effectId,
          attempt: row.attempts,
          aggregateType: row.aggregateType,
          aggregateId: row.aggregateId,
          by: "operator"
        }, "internal").pipe(Effect.annotateLogs({ effectId: row.effectId, action }))
      })

    return handlers
      .handle("list", ({ urlParams }) =>
        Outbox.list({ status: urlParams.status, kind: urlParams.kind, aggregateId: urlParams.aggregateId, limit: urlParams.limit ?? 100 }).pipe(
          Effect.mapError((e) => storageUnavailable(StorageErrors.toStorageFailure("list effects")(e))),
          Effect.map((effects) => ({ effects })),
          Effect.provideService(SqlClient, sql)
        ))
      .handle("get", ({ path }) => find(path.effectId))
      .handleRaw("retry", ({ path, request }) => operate("retry", path.effectId, request))
      .handleRaw("cancel", ({ path, request }) => operate("cancel", path.effectId, request))
      .handle("release", ({ path }) => release(path.effectId))
      .handleRaw("fail", ({ path, request }) => fail(path.effectId, request))
  }))
