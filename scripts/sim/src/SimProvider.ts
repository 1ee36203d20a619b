/**
 * The model, simulated: the scripted provider answers (its answer depends on the transcript only),
 * and the seed decides which calls are unavailable (retryable) and how long each takes.
 */
import { ModelProvider, ProviderError, ScriptedProvider } from "@orchestration/agents"
import { Effect, Layer } from "effect"
import type { Rng } from "./Rng.js"
import type { Trace } from "./Trace.js"

export const layer = (rng: Rng, trace: Trace, unavailableRate: () => number) =>
  Layer.succeed(ModelProvider, {
    step: (request) =>
      Effect.gen(function* () {
        yield* Effect.sleep(rng.int(3_000))
        if (rng.chance(unavailableRate())) {
          trace.add("model", `${request.requestId} unavailable`)
          return yield* new ProviderError({
            provider: "sim",
            requestId: request.requestId,
            reason: "unavailable",
            message: "simulated outage"
          })
        }
        const answer = yield* ScriptedProvider.make.step(request)
        trace.add("model", `${request.requestId} ${answer.toolCalls.length} calls`)
        return answer
      })
  })
