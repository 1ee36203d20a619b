/**
 * The operator's view of the outbox and its two actions. Retry and cancel are internal settlement
 * commands through the front door (so they are idempotent and in the log), aimed at the attempt
 * the operator saw: the default id `operator:<action>:<effectId>#<attempts>` makes a repeated click
 * the same command.
 */
import { HttpApiBuilder, type HttpApiGroup } from "@effect/platform"
import type { HttpServerRequest } from "@effect/platform/HttpServerRequest"
import { SqlClient } from "@effect/sql/SqlClient"
import { CommandId, EffectOutcomes, type Engine, Outbox, StorageErrors } from "@orchestration/engine"
import { Effect, type Layer, ParseResult, Schema } from "effect"
import { InvalidRequest, NotFound, storageUnavailable } from "../ApiErrors.js"
import type { ServerMetrics } from "../Metrics.js"
import type { StoreWritability } from "../StoreWritability.js"
import { OperatorBody, ServerApi } from "./Api.js"
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

    const operate = (action: "retry" | "cancel", effectId: string, request: HttpServerRequest) =>
      Effect.gen(function* () {
        const raw = yield* readJsonBody(request, { optional: true, invalid })
        const body = yield* Schema.decodeUnknown(OperatorBody, { onExcessProperty: "error" })(raw ?? {}).pipe(
          Effect.mapError((error) =>
            new InvalidRequest({
              message: "the body of an operator action is { commandId? }",
              issues: ParseResult.ArrayFormatter.formatErrorSync(error).map((i) => ({ path: i.path.map(String), message: i.message }))
            })
          )
        )
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
  }))
