/**
 * The operator's view of the outbox and its two actions. Retry and cancel are internal settlement
 * commands through the front door (so they are idempotent and in the log). The command holds what
 * the operator sent (action, effect, id), never the row's state, so the same id with the same
 * request is always the same command. The default id names the row's state when the request
 * arrives (EffectOutcomes.operatorId): a repeated click is one action, and a refused one is not
 * stored, so it never blocks the next legitimate action.
 * Release and fail act on a quarantined row (engine Quarantine.ts): release dispatches its parked
 * settlement again, fail ends it with the operator's reason.
 */
import { HttpApiBuilder, type HttpApiGroup } from "@effect/platform"
import type { HttpServerRequest } from "@effect/platform/HttpServerRequest"
import { SqlClient } from "@effect/sql/SqlClient"
import { CommandId, EffectOutcomes, Engine, Outbox, Quarantine, StorageErrors } from "@orchestration/engine"
import { Effect, type Layer, Option, ParseResult, Schema } from "effect"
import { fromDispatchError, InvalidRequest, NotFound, fromStorageFailure } from "../ApiErrors.js"
import type { ServerMetrics } from "../Metrics.js"
import type { StoreWritability } from "../StoreWritability.js"
import { FailQuarantinedBody, OperatorBody, ServerApi } from "./Api.js"
import * as EdgeDispatch from "./EdgeDispatch.js"
import { readJsonBody } from "./RequestBody.js"

const invalid = (message: string) => new InvalidRequest({ message, issues: [] })

export const EffectsLive: Layer.Layer<
  HttpApiGroup.ApiGroup<"orchestration", "effects">,
  never,
  Engine.Engine | ServerMetrics | StoreWritability | SqlClient
> = HttpApiBuilder.group(ServerApi, "effects", (handlers) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const engine = yield* Engine.Engine
    const dispatch = yield* EdgeDispatch.make
    const find = (effectId: string) =>
      Outbox.find(effectId).pipe(
        Effect.mapError((e) => fromStorageFailure(StorageErrors.toStorageFailure("read effect")(e))),
        Effect.flatMap((row) =>
          row === undefined ? Effect.fail(new NotFound({ message: `no effect '${effectId}'` })) : Effect.succeed(row)
        ),
        Effect.provideService(SqlClient, sql)
      )

    /**
     * A typed operator body, or InvalidRequest naming what is wrong. `quiet`: the issues name the
     * field and the rule, never the value (a free-text field may hold anything, of any length).
     */
    const operatorBody = <A, I>(
      request: HttpServerRequest,
      schema: Schema.Schema<A, I>,
      shape: string,
      optional: boolean,
      quiet = false
    ) =>
      Effect.gen(function* () {
        const raw = yield* readJsonBody(request, { optional, invalid })
        // Only an absent body is `{}`: a JSON `null` is a body, and not the object the action takes.
        return yield* Schema.decodeUnknown(schema, { onExcessProperty: "error" })(raw === undefined ? {} : raw).pipe(
          Effect.mapError(
            (error) =>
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
            StorageFailure: (failure) => Effect.fail(fromStorageFailure(failure)),
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
          Effect.catchTag("StorageFailure", (failure) => Effect.fail(fromStorageFailure(failure))),
          Effect.provideService(SqlClient, sql),
          Effect.annotateLogs({ effectId, action: "fail" })
        )
      })

    const operate = (action: "retry" | "cancel", effectId: string, request: HttpServerRequest) =>
      Effect.gen(function* () {
        const body = yield* operatorBody(request, OperatorBody, "{ commandId? }", true)
        if (body.commandId !== undefined && !body.commandId.startsWith("operator:")) {
          const problem = CommandId.commandIdProblem(body.commandId, "client")
          if (problem !== undefined) return yield* invalid(problem)
        }
        const row = yield* find(effectId)
        // A chosen id follows the client rules, except that a default id of this action on this effect, of
        // its state now or before, is allowed (a retry of an earlier answer). Another effect's or action's
        // would take that one's default (409 for it until its row changed), and one of a state the row has
        // not reached would be a later plain request's id, answered then from this receipt, not applied.
        if (body.commandId?.startsWith("operator:") && !EffectOutcomes.isOperatorIdSoFar(body.commandId, action, row)) {
          return yield* invalid(
            `an operator: id must be operator:${action}:<this effect's id>#<attempts>.<actions> of this effect's state now (${row.attempts}.${row.operatorActions}) or before`
          )
        }
        // A plain request that finds the row as the same action left it repeats that action.
        const repeated = body.commandId === undefined ? EffectOutcomes.previousOperatorId(action, row) : undefined
        const previous =
          repeated === undefined
            ? undefined
            : Option.getOrUndefined(yield* engine.receipt(repeated).pipe(Effect.mapError(fromStorageFailure)))
        const commandId = body.commandId ?? EffectOutcomes.defaultOperatorId(action, row, previous)
        return yield* dispatch(EffectOutcomes.operatorCommand(action, row, commandId), "internal").pipe(
          Effect.annotateLogs({ effectId: row.effectId, action })
        )
      })

    return handlers
      .handle("list", ({ urlParams }) =>
        Outbox.list({
          status: urlParams.status,
          kind: urlParams.kind,
          aggregateId: urlParams.aggregateId,
          limit: urlParams.limit ?? 100
        }).pipe(
          Effect.mapError((e) => fromStorageFailure(StorageErrors.toStorageFailure("list effects")(e))),
          Effect.map((effects) => ({ effects })),
          Effect.provideService(SqlClient, sql)
        )
      )
      .handle("get", ({ path }) => find(path.effectId))
      .handleRaw("retry", ({ path, request }) => operate("retry", path.effectId, request))
      .handleRaw("cancel", ({ path, request }) => operate("cancel", path.effectId, request))
      .handle("release", ({ path }) => release(path.effectId))
      .handleRaw("fail", ({ path, request }) => fail(path.effectId, request))
  })
)
