/**
 * The command router: the registered aggregates in, and for each incoming value either the command
 * to queue (its identity, aggregate and decision) or the typed refusal. It is pure and synchronous,
 * so every rule a command must pass before it is queued is tested without a store or an engine, and
 * a refused command costs no Effect step. The rules: a command is a JSON object; its id follows the
 * id rules of its origin; clients may not send the engine's reserved types; the type names a
 * settlement, a timer's failure or a registered command; the payload decodes with no excess
 * property; the aggregate's id can be told from it; a client's command nests at most
 * JsonDepth.maxDepth levels.
 */
import { Either, ParseResult, Schema } from "effect"
import type { AnyAggregate } from "./Aggregate.js"
import { fingerprint } from "./CanonicalJson.js"
import { commandIdProblem, isReservedType, type Origin } from "./CommandId.js"
import { decodeSettlementQuickly, settlementSchemas, type SettlementCommand } from "./EffectOutcomes.js"
import { InvalidCommand } from "./Errors.js"
import * as JsonDepth from "./JsonDepth.js"
import { decideCommand, decideSettlementCommand, type QueuedCommand } from "./Processor.js"
import type * as Receipts from "./Receipts.js"
import {
  chunkFingerprint,
  decideStreamCommand,
  decodeStreamQuickly,
  EffectStream,
  readsThroughPage
} from "./StreamChunks.js"
import { decideTimerFailure, TIMER_FAILED, TimerFailed } from "./TimerFailures.js"

export interface CommandRouter {
  /** Validates and routes a command: the command to queue, or why it is refused. */
  readonly route: (input: unknown, origin: Origin) => QueuedCommand | InvalidCommand
  /** The registered aggregate of that name. */
  readonly aggregate: (name: string) => AnyAggregate | undefined
}

type Decoder = (raw: unknown) => Either.Either<any, ParseResult.ParseError>

const decoderOf = (schema: Schema.Schema<any, any, never>): Decoder =>
  Schema.decodeUnknownEither(schema, { onExcessProperty: "error" })

const settlementDecoders = new Map<string, Decoder>(
  Object.entries(settlementSchemas as Record<string, Schema.Schema<any, any, never>>).map(([type, schema]) => [
    type,
    decoderOf(schema)
  ])
)

const decodeStream = decoderOf(EffectStream)
const decodeTimerFailed = decoderOf(TimerFailed)

const formatIssues = (error: ParseResult.ParseError) =>
  ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) => ({
    path: issue.path.map(String),
    message: issue.message
  }))

const identityOf = (
  raw: Record<string, unknown>,
  aggregate: AnyAggregate,
  aggregateId: string,
  print: string = fingerprint(raw)
): Receipts.CommandIdentity => ({
  commandId: raw.commandId as string,
  aggregateType: aggregate.name,
  aggregateId,
  commandType: raw.type as string,
  fingerprint: print
})

const invalid = (message: string, commandId?: string, issues: InvalidCommand["issues"] = []) =>
  new InvalidCommand({ message, issues, ...(typeof commandId === "string" ? { commandId } : {}) })

/** Thrown by `make` when two aggregates declare one command type: the engine could not route it. */
export class DuplicateCommandType extends Error {
  constructor(readonly commandType: string) {
    super(`command type '${commandType}' is declared by two aggregates`)
  }
}

/** Builds the routing tables once; throws DuplicateCommandType if a type is declared twice. */
export const make = (aggregates: ReadonlyArray<AnyAggregate>): CommandRouter => {
  const routes = new Map<string, { readonly aggregate: AnyAggregate; readonly decode: Decoder }>()
  const aggregatesByName = new Map<string, AnyAggregate>()
  for (const aggregate of aggregates) {
    aggregatesByName.set(aggregate.name, aggregate)
    for (const [type, schema] of Object.entries(aggregate.commands)) {
      if (routes.has(type)) throw new DuplicateCommandType(type)
      routes.set(type, { aggregate, decode: decoderOf(schema) })
    }
  }

  /**
   * An engine command addressed to an aggregate by name (a settlement, a stream chunk, a timer's failure):
   * decoded, with that aggregate and the command's identity under it.
   */
  const toNamedAggregate = <C extends { readonly aggregateType: string; readonly aggregateId: string }>(
    raw: Record<string, unknown>,
    decode: Decoder,
    commandId: string | undefined
  ):
    | { readonly command: C; readonly aggregate: AnyAggregate; readonly identity: Receipts.CommandIdentity }
    | InvalidCommand => {
    const decoded = decode(raw)
    if (Either.isLeft(decoded)) return invalid(`invalid '${raw.type}' command`, commandId, formatIssues(decoded.left))
    const command: C = decoded.right
    const aggregate = aggregatesByName.get(command.aggregateType)
    if (aggregate === undefined) return invalid(`no aggregate named '${command.aggregateType}'`, commandId)
    return { command, aggregate, identity: identityOf(raw, aggregate, command.aggregateId) }
  }

  /**
   * An engine command a quick check decoded (StreamChunks, EffectOutcomes), under its aggregate;
   * undefined when there is none to go on, so the schema's decode says what is wrong.
   */
  const quickly = <C extends { readonly aggregateType: string; readonly aggregateId: string }>(
    raw: Record<string, unknown>,
    quick: C | undefined,
    print?: string
  ) => {
    const aggregate = quick === undefined ? undefined : aggregatesByName.get(quick.aggregateType)
    return quick === undefined || aggregate === undefined
      ? undefined
      : { command: quick, aggregate, identity: identityOf(raw, aggregate, quick.aggregateId, print) }
  }

  const routeSettlement = (
    raw: Record<string, unknown>,
    decode: Decoder,
    commandId: string | undefined
  ): QueuedCommand | InvalidCommand => {
    const routed =
      quickly<SettlementCommand>(raw, decodeSettlementQuickly(raw)) ??
      toNamedAggregate<SettlementCommand>(raw, decode, commandId)
    if (routed instanceof InvalidCommand) return routed
    const { command: settlement, aggregate, identity } = routed
    return {
      identity,
      aggregate,
      decide: decideSettlementCommand(aggregate, identity, settlement),
      settles: true,
      effectId: settlement.effectId,
      settlement
    }
  }

  /**
   * A stream chunk (`effect.stream`, internal only) goes to its effect's aggregate, like a settlement.
   * Its own quick check and fingerprint (StreamChunks) stand in for the schema and the canonical
   * JSON hash: the engine sends one per stream and flush window.
   */
  const routeStream = (raw: Record<string, unknown>, commandId: string | undefined): QueuedCommand | InvalidCommand => {
    const quick = decodeStreamQuickly(raw)
    const routed =
      (quick === undefined ? undefined : quickly(raw, quick, chunkFingerprint(quick))) ??
      toNamedAggregate<EffectStream>(raw, decodeStream, commandId)
    if (routed instanceof InvalidCommand) return routed
    const chunk = routed.command
    // One fingerprint for a chunk, whichever way it was decoded.
    const identity =
      quick === undefined ? { ...routed.identity, fingerprint: chunkFingerprint(chunk) } : routed.identity
    return {
      identity,
      aggregate: routed.aggregate,
      decide: decideStreamCommand(routed.aggregate, identity, chunk),
      settles: false,
      throughPage: readsThroughPage(routed.aggregate),
      effectId: chunk.effectId
    }
  }

  /** A timer's failure (`engine.timer-failed`, internal only) goes to the timer's aggregate, like a settlement. */
  const routeTimerFailure = (
    raw: Record<string, unknown>,
    commandId: string | undefined
  ): QueuedCommand | InvalidCommand => {
    const routed = toNamedAggregate<TimerFailed>(raw, decodeTimerFailed, commandId)
    if (routed instanceof InvalidCommand) return routed
    return {
      identity: routed.identity,
      aggregate: routed.aggregate,
      decide: decideTimerFailure(routed.aggregate, routed.identity, routed.command),
      settles: false,
      pure: true
    }
  }

  const route = (input: unknown, origin: Origin): QueuedCommand | InvalidCommand => {
    if (typeof input !== "object" || input === null || Array.isArray(input)) {
      return invalid("a command is a JSON object with commandId and type")
    }
    // Before anything that recurses into the value (the schema's error messages, the fingerprint).
    if (origin === "client" && JsonDepth.deeperThan(input, JsonDepth.maxDepth)) {
      return invalid(`the command ${JsonDepth.tooDeep}`)
    }
    const raw = input as Record<string, unknown>
    const idProblem = commandIdProblem(raw.commandId, origin)
    const commandId = typeof raw.commandId === "string" ? raw.commandId : undefined
    if (idProblem !== undefined) return invalid(idProblem, commandId)
    if (typeof raw.type !== "string") return invalid("type must be a string", commandId)
    if (origin === "client" && isReservedType(raw.type)) {
      return invalid(`command type '${raw.type}' is internal to the engine`, commandId)
    }
    const decodeSettlement = settlementDecoders.get(raw.type)
    if (decodeSettlement !== undefined) return routeSettlement(raw, decodeSettlement, commandId)
    if (raw.type === "effect.stream") return routeStream(raw, commandId)
    if (raw.type === TIMER_FAILED) return routeTimerFailure(raw, commandId)
    const target = routes.get(raw.type)
    if (target === undefined) return invalid(`unknown command type '${raw.type}'`, commandId)
    const decoded = target.decode(raw)
    if (Either.isLeft(decoded)) return invalid(`invalid '${raw.type}' command`, commandId, formatIssues(decoded.left))
    let aggregateId: string
    try {
      aggregateId = target.aggregate.aggregateId(decoded.right)
    } catch (error) {
      return invalid(`cannot tell the aggregate of this command: ${String(error)}`, commandId)
    }
    const identity = identityOf(raw, target.aggregate, aggregateId)
    return {
      identity,
      aggregate: target.aggregate,
      decide: decideCommand(target.aggregate, identity, decoded.right),
      settles: false,
      pure: true
    }
  }

  return { route, aggregate: (name) => aggregatesByName.get(name) }
}
