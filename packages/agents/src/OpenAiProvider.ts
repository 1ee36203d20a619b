/**
 * The OpenAI-compatible adapter: `@effect/ai` 0.37 + `@effect/ai-openai` 0.41, which speak the
 * Responses API (`POST <apiUrl>/responses`). Our transcript keeps OpenAI's chat format; this
 * module converts it into `Prompt` messages (assistant tool calls become `function_call` items,
 * tool results `function_call_output` items) and asks for one step with tool call resolution
 * disabled: the library never performs a tool, the engine does, as an effect. `stream` asks the
 * same with `stream: true` (server-sent events, `LanguageModel.streamText`): text deltas and tool
 * argument deltas as they come, then the response assembled from the finished parts. Interrupting the
 * stream aborts its HTTP request.
 */
import { AiError, LanguageModel, Prompt, Tool, type Toolkit } from "@effect/ai"
import { OpenAiClient, OpenAiLanguageModel } from "@effect/ai-openai"
import type { HttpClient } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { Effect, Either, Layer, type ParseResult, type Redacted, Schema, type Scope, Stream } from "effect"
import {
  ModelProvider,
  type ModelProviderShape,
  type ModelStepPart,
  type ModelStepRequest,
  type ModelToolCall,
  ProviderError
} from "./Provider.js"
import type { ToolDefinition } from "./Tools.js"
import type { TranscriptMessage } from "./Transcript.js"

export interface OpenAiProviderConfig {
  /** Base URL including the version, e.g. `https://api.openai.com/v1` or a local compatible server. */
  readonly apiUrl: string
  readonly apiKey?: Redacted.Redacted
  readonly model: string
}

const providerName = "openai"

/** Builds the adapter on the given HttpClient (the layer uses undici). */
export const make = (
  config: OpenAiProviderConfig
): Effect.Effect<ModelProviderShape, never, HttpClient.HttpClient | Scope.Scope> =>
  Effect.gen(function* () {
    const client = unfinishedResponsesFail(yield* OpenAiClient.make({ apiUrl: config.apiUrl, apiKey: config.apiKey }))
    // strict: false, because strict mode demands every property be required and our inputs have
    // optional ones (execute's timeoutSeconds); arguments are validated by the performers anyway.
    const model = yield* OpenAiLanguageModel.make({ model: config.model, config: { strict: false } }).pipe(
      Effect.provideService(OpenAiClient.OpenAiClient, client)
    )

    const promptOf = (request: ModelStepRequest) =>
      Either.match(toPrompt(request.transcript), {
        onLeft: (message) =>
          Effect.fail(
            new ProviderError({
              provider: providerName,
              requestId: request.requestId,
              reason: "invalid-request",
              message
            })
          ),
        onRight: Effect.succeed
      })

    const step = Effect.fn("OpenAiProvider.step")(function* (request: ModelStepRequest) {
      const prompt = yield* promptOf(request)
      const response = yield* LanguageModel.generateText({
        prompt,
        toolkit: toolkitFor(request.tools),
        disableToolCallResolution: true
      }).pipe(
        // The request id travels as metadata, so provider-side logs can be matched to the step.
        OpenAiLanguageModel.withConfigOverride({ metadata: { request_id: request.requestId } }),
        Effect.provideService(LanguageModel.LanguageModel, model),
        Effect.mapError((error) => toProviderError(request.requestId, error))
      )
      return {
        text: response.text,
        toolCalls: response.toolCalls.map((call) => ({ id: call.id, name: call.name, arguments: call.params }))
      }
    })

    const stream = (request: ModelStepRequest): Stream.Stream<ModelStepPart, ProviderError> =>
      Stream.unwrap(
        Effect.map(promptOf(request), (prompt) => {
          let text = ""
          let finished = false
          const toolCalls: Array<ModelToolCall> = []
          const names = new Map<string, string>()
          const parts = LanguageModel.streamText({
            prompt,
            toolkit: toolkitFor(request.tools),
            disableToolCallResolution: true
          }).pipe(
            Stream.mapConcat((part): ReadonlyArray<ModelStepPart> => {
              switch (part.type) {
                case "text-delta":
                  text += part.delta
                  return part.delta === "" ? [] : [{ type: "text-delta", text: part.delta }]
                case "tool-params-start":
                  names.set(part.id, part.name)
                  return []
                case "tool-params-delta":
                  return [
                    { type: "tool-call-delta", callId: part.id, name: names.get(part.id) ?? "", delta: part.delta }
                  ]
                case "tool-call":
                  toolCalls.push({ id: part.id, name: part.name, arguments: part.params })
                  return []
                case "finish":
                  finished = true
                  return [{ type: "finished", response: { text, toolCalls: [...toolCalls] } }]
                default:
                  return []
              }
            }),
            // As in `step`: the request id travels as metadata (the stream has no config to merge with).
            Stream.provideService(OpenAiLanguageModel.Config, { metadata: { request_id: request.requestId } }),
            Stream.provideService(LanguageModel.LanguageModel, model),
            Stream.mapError((error) => toProviderError(request.requestId, error))
          )
          // Events end the response (completed, incomplete, failed); a stream that stops before one
          // was cut (a proxy's idle timeout, a reset connection): asking again may well succeed.
          const cut = Stream.suspend(() =>
            finished
              ? Stream.empty
              : Stream.fail(
                  new ProviderError({
                    provider: providerName,
                    requestId: request.requestId,
                    reason: "unavailable",
                    message: "the stream ended before the response did (the connection was closed early)"
                  })
                )
          )
          return Stream.concat(parts, cut)
        })
      )

    return { step, stream }
  })

/**
 * A response the model did not finish fails the step with the reason. The library would take each of
 * these as an answer, or as one no retry can cure:
 * - `failed` (streamed `response.failed`, or an `error` event): turned into an ordinary finish part
 *   (reason "stop"), so the text streamed so far (often none) was recorded and the turn completed.
 *   Now `unavailable` (tried again, then the turn fails visibly): the event does not say reliably
 *   which failures a retry cannot cure;
 * - `incomplete` (the output limit, a content filter): the same, with the text cut mid-sentence. Now
 *   `malformed-response`: the turn fails at once, saying why (see incompleteResponse);
 * - a tool call whose arguments are not JSON (a model's slip): a decode failure (`malformed-response`),
 *   which failed the turn at once although the model answers again differently. Now `unavailable`.
 */
const unfinishedResponsesFail = (client: OpenAiClient.Service): OpenAiClient.Service => ({
  ...client,
  createResponse: (options) =>
    Effect.flatMap(client.createResponse(options), (response) => {
      const problem =
        responseProblem(response) ??
        response.output.map((item) => (item.type === "function_call" ? callProblem(item) : undefined)).find(Boolean)
      return problem === undefined ? Effect.succeed(response) : Effect.fail(problem)
    }),
  createResponseStream: (options) =>
    client.createResponseStream(options).pipe(
      Stream.mapEffect((event) => {
        // By the event's type, not the status inside it: a compatible server may leave that out.
        const problem =
          event.type === "response.failed"
            ? failedResponse(event.response)
            : event.type === "response.incomplete"
              ? incompleteResponse(event.response)
              : event.type === "error"
                ? providerFailure(event.code, event.message)
                : event.type === "response.output_item.done" && event.item.type === "function_call"
                  ? callProblem(event.item)
                  : undefined
        return problem === undefined ? Effect.succeed(event) : Effect.fail(problem)
      })
    )
})

interface ResponseEnd {
  readonly status?: string | undefined
  readonly error?:
    | { readonly code?: string | null | undefined; readonly message?: string | undefined }
    | null
    | undefined
  readonly incomplete_details?: { readonly reason?: string | undefined } | null | undefined
}

const failedResponse = (response: ResponseEnd) =>
  providerFailure(response.error?.code, response.error?.message ?? "the response failed")

// Not asked again: the output limit and the content filter usually cut the same answer the same way,
// and each try would pay for a whole answer again. The turn fails at once, saying why.
const incompleteResponse = (response: ResponseEnd) =>
  new AiError.MalformedOutput({
    module: "OpenAiProvider",
    method: "createResponse",
    description: `the model's response is incomplete (${String(response.incomplete_details?.reason ?? "no reason given").slice(0, 64)}): it is not taken as the answer`
  })

/** Why an unstreamed response is not an answer: it failed, or it is incomplete. */
const responseProblem = (response: ResponseEnd): AiError.UnknownError | AiError.MalformedOutput | undefined =>
  response.status === "failed"
    ? failedResponse(response)
    : response.status === "incomplete"
      ? incompleteResponse(response)
      : undefined

/** A tool call whose arguments are not JSON: a failed step, not an answer. */
const callProblem = (item: { readonly name: string; readonly arguments: string }): AiError.UnknownError | undefined =>
  Either.isRight(parseJson(item.arguments))
    ? undefined
    : new AiError.UnknownError({
        module: "OpenAiProvider",
        method: "createResponse",
        description: `the arguments of the model's call of '${item.name.slice(0, 64)}' are not JSON`
      })

const providerFailure = (code: string | null | undefined, message: string) =>
  new AiError.UnknownError({
    module: "OpenAiProvider",
    method: "createResponse",
    description: `the provider failed the response${code === null || code === undefined ? "" : ` (${code})`}: ${message}`
  })

export const layer = (config: OpenAiProviderConfig): Layer.Layer<ModelProvider> =>
  Layer.scoped(ModelProvider, make(config)).pipe(Layer.provide(NodeHttpClient.layerUndici))

// ---------------------------------------------------------------------------------------------
// Transcript → Prompt

/** Converts the chat-format transcript; fails only when a call's arguments are not JSON. */
export const toPrompt = (transcript: ReadonlyArray<TranscriptMessage>): Either.Either<Prompt.Prompt, string> => {
  const messages: Array<Prompt.Message> = []
  // Tool results name their tool in the Prompt format; the chat format only links them by id.
  const toolNames = new Map<string, string>()
  for (const message of transcript) {
    switch (message.role) {
      case "user": {
        messages.push(Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: message.content })] }))
        break
      }
      case "assistant": {
        const parts: Array<Prompt.AssistantMessagePart> = []
        if (message.content !== null && message.content.length > 0) {
          parts.push(Prompt.makePart("text", { text: message.content }))
        }
        for (const call of message.tool_calls ?? []) {
          const params = parseJson(call.function.arguments)
          if (Either.isLeft(params)) return Either.left(`arguments of tool call ${call.id} are not valid JSON`)
          toolNames.set(call.id, call.function.name)
          parts.push(
            Prompt.makePart("tool-call", {
              id: call.id,
              name: call.function.name,
              params: params.right,
              providerExecuted: false
            })
          )
        }
        messages.push(Prompt.makeMessage("assistant", { content: parts }))
        break
      }
      case "tool": {
        const result = parseJson(message.content)
        messages.push(
          Prompt.makeMessage("tool", {
            content: [
              Prompt.makePart("tool-result", {
                id: message.tool_call_id,
                // An orphan result has no call to name it; the provider is the one to refuse it.
                name: toolNames.get(message.tool_call_id) ?? "unknown",
                // JSON content goes as its value, so the library's JSON.stringify gives it back unchanged.
                result: Either.getOrElse(result, () => message.content),
                isFailure: false,
                providerExecuted: false
              })
            ]
          })
        )
        break
      }
    }
  }
  return Either.right(Prompt.fromMessages(messages))
}

const parseJson = (text: string): Either.Either<unknown, unknown> => Either.try(() => JSON.parse(text) as unknown)

// ---------------------------------------------------------------------------------------------
// Tool definitions → toolkit

/**
 * Parameters that accept any object but describe the tool's real input to the model. The library
 * decodes the model's arguments with the tool's parameter schema and fails the whole step on a
 * mismatch; we want bad arguments to reach the performer, whose ToolInputError the model then sees.
 */
const lenientParameters = (input: ToolDefinition["input"]) =>
  Schema.Struct({}, Schema.Record({ key: Schema.String, value: Schema.Unknown })).annotations({
    jsonSchema: Tool.getJsonSchemaFromSchemaAst(input.ast)
  })

export const toolFor = (definition: ToolDefinition) =>
  Tool.make(definition.name, { description: definition.description }).setParameters(lenientParameters(definition.input))

/** A toolkit whose handler is never called: resolution is disabled, tools run as effects. */
const toolkitFor = (definitions: ReadonlyArray<ToolDefinition>): Toolkit.WithHandler<Record<string, Tool.Any>> => ({
  tools: Object.fromEntries(definitions.map((definition) => [definition.name, toolFor(definition)])),
  handle: (name) => Effect.dieMessage(`tool ${String(name)} must be performed as an effect, not by the model adapter`)
})

// ---------------------------------------------------------------------------------------------
// Errors, mapped once

const toProviderError = (requestId: string, error: AiError.AiError | ParseResult.ParseError): ProviderError => {
  const make = (reason: ProviderError["reason"], message: string, status?: number) =>
    new ProviderError({
      provider: providerName,
      requestId,
      reason,
      message,
      ...(status === undefined ? {} : { status })
    })
  switch (error._tag) {
    case "HttpResponseError": {
      const status = error.response.status
      const message = providerMessage(error.body) ?? error.message
      if (error.reason !== "StatusCode") return make("malformed-response", message, status)
      const retryable = status === 408 || status === 429 || status >= 500
      return make(retryable ? "unavailable" : "rejected", message, status)
    }
    case "HttpRequestError":
    case "UnknownError":
      return make("unavailable", error.message)
    case "MalformedInput":
      return make("invalid-request", error.message)
    case "MalformedOutput":
    case "ParseError":
      return make("malformed-response", error.message)
  }
}

/** The `error.message` of an OpenAI-style error body, when the body is one. */
const providerMessage = (body: string | undefined): string | undefined => {
  if (body === undefined) return undefined
  const parsed = parseJson(body)
  if (Either.isLeft(parsed)) return body
  const value = parsed.right
  if (typeof value === "object" && value !== null && "error" in value) {
    const inner = value.error
    if (typeof inner === "object" && inner !== null && "message" in inner && typeof inner.message === "string") {
      return inner.message
    }
  }
  return body
}
