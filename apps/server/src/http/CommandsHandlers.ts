/** POST /v1/commands (the front door over HTTP) and GET /v1/commands/:commandId (its receipt). */
import { HttpApiBuilder } from "@effect/platform"
import { Engine, Receipts } from "@orchestration/engine"
import { Effect, Option } from "effect"
import { InvalidCommand, NotFound, fromStorageFailure } from "../ApiErrors.js"
import { ServerApi } from "./Api.js"
import * as EdgeDispatch from "./EdgeDispatch.js"
import { readJsonBody } from "./RequestBody.js"

export const CommandsLive = HttpApiBuilder.group(ServerApi, "commands", (handlers) =>
  Effect.gen(function* () {
    const engine = yield* Engine.Engine
    const dispatch = yield* EdgeDispatch.make
    return handlers
      .handleRaw("dispatch", ({ request }) =>
        readJsonBody(request, {
          optional: false,
          invalid: (message) => new InvalidCommand({ message, issues: [] })
        }).pipe(
          // The body goes to the engine as sent: it checks the id rules, reserved types and the
          // command's schema, so the edge never disagrees with it.
          Effect.flatMap((body) => dispatch(body, "client"))
        )
      )
      .handle("receipt", ({ path }) =>
        Effect.gen(function* () {
          const found = yield* engine.receipt(path.commandId).pipe(Effect.mapError(fromStorageFailure))
          if (Option.isNone(found))
            return yield* new NotFound({ message: `no command '${path.commandId}' has a receipt` })
          const receipt = found.value
          // A damaged receipt is not shown as if whole (its effect ids or rejection would read as empty).
          const damage = Receipts.damage(receipt)
          if (damage !== undefined) return yield* fromStorageFailure(damage)
          return {
            commandId: receipt.commandId,
            status: receipt.status,
            aggregateType: receipt.aggregateType,
            aggregateId: receipt.aggregateId,
            commandType: receipt.commandType,
            sequence: receipt.lastSequence,
            effectIds: receipt.effectIds,
            ...(receipt.rejection === null ? {} : { rejection: receipt.rejection }),
            acceptedAt: receipt.acceptedAt
          }
        })
      )
  })
)
