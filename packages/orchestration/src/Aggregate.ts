/**
 * How a domain is declared: schemas for its commands and events, an initial state, and two pure
 * functions. `decide` sees the current state and the command and answers with events and effect
 * intents, or a rejection; `evolve` folds one event into the state. Neither does I/O: time and new
 * ids come from the DecideContext, so a replay under TestClock decides exactly the same.
 */
import { Schema } from "effect"
import type { EffectOutcome } from "./EffectOutcomes.js"
import type { StreamChunkNotice } from "./StreamChunks.js"
import type { TimerFailure } from "./TimerFailures.js"
import type { TimerIntent } from "./Timers.js"

/** An effect the domain wants performed after the commit. It becomes one outbox row. */
export interface EffectIntent {
  readonly kind: string
  readonly payload: unknown
  /**
   * Deterministic id; when absent the engine derives `<commandId>:<key ?? index>` (bounded by
   * hashing). An explicit id must fit the command-id alphabet and `CommandId.EFFECT_ID_MAX`
   * (build it with `CommandId.boundedId`), because outcome ids embed it.
   */
  readonly id?: string
  /** Part of the derived id, so the same command always names the same effect. */
  readonly key?: string
  /** Rows of one lane run one at a time, in order. Defaults to the aggregate (`<type>:<id>`). */
  readonly lane?: string
  /** Not claimable before this time (epoch ms). Defaults to the command's time. */
  readonly availableAt?: number
}

export interface Decision<E> {
  readonly _tag: "Decision"
  readonly events: ReadonlyArray<E>
  readonly effects: ReadonlyArray<EffectIntent>
  /** Effects of this aggregate to cancel in the same transaction; a running one is stopped (CancelWatch). */
  readonly cancel: ReadonlyArray<{ readonly effectId: string; readonly reason: string }>
  /** Timers to schedule, or move when the id is already scheduled (Timers.ts), in the same transaction. */
  readonly timers?: ReadonlyArray<TimerIntent>
  /** Pending timers of this aggregate to cancel, by timerId. */
  readonly cancelTimers?: ReadonlyArray<string>
}

export interface Rejection {
  readonly _tag: "Rejection"
  readonly reason: string
  readonly message: string
}

export const Decision = {
  of: <E>(decision: {
    readonly events?: ReadonlyArray<E>
    readonly effects?: ReadonlyArray<EffectIntent>
    readonly cancel?: ReadonlyArray<{ readonly effectId: string; readonly reason: string }>
    readonly timers?: ReadonlyArray<TimerIntent>
    readonly cancelTimers?: ReadonlyArray<string>
  }): Decision<E> => ({
    _tag: "Decision",
    events: decision.events ?? [],
    effects: decision.effects ?? [],
    cancel: decision.cancel ?? [],
    ...(decision.timers !== undefined && decision.timers.length > 0 ? { timers: decision.timers } : {}),
    ...(decision.cancelTimers !== undefined && decision.cancelTimers.length > 0
      ? { cancelTimers: decision.cancelTimers }
      : {})
  }),
  /** Accept the command without changing anything; it still gets an accepted receipt. */
  none: <E = never>(): Decision<E> => ({ _tag: "Decision", events: [], effects: [], cancel: [] }),
  reject: (reason: string, message?: string): Rejection => ({ _tag: "Rejection", reason, message: message ?? reason })
}

/** What a decider may know besides state and command. */
export interface DecideContext {
  readonly commandId: string
  readonly aggregateId: string
  /** The command's time: Effect's Clock at processing (TestClock in tests), epoch ms. */
  readonly now: number
  /** A new id that is the same every time this command is decided. */
  readonly deriveId: (key: string) => string
}

/** An event as the log stores it: decoded payload plus where it sits in the log. */
export interface EventRecord {
  readonly sequence: number
  readonly eventId: string
  readonly aggregateType: string
  readonly aggregateId: string
  readonly version: number
  readonly type: string
  /** The encoded event, as stored (JSON); null when it could not be read (`undecodable` says why). */
  readonly payload: unknown
  /** Present when the stored payload is not JSON: why. Decoding such a record fails (UndecodableEvent). */
  readonly undecodable?: string
  readonly commandId: string
  readonly occurredAt: number
  readonly schemaVersion: number
}

export interface AggregateDefinition<
  S,
  C extends { readonly type: string; readonly commandId: string },
  E extends { readonly type: string }
> {
  readonly name: string
  /** One schema per command type, keyed by that type; each decodes to a member of C. */
  readonly commands: { readonly [type: string]: Schema.Schema<any, any, never> }
  readonly events: Schema.Schema<E, any, never>
  readonly aggregateId: (command: C) => string
  readonly initialState: S
  readonly evolve: (state: S, event: E) => S
  readonly decide: (state: S, command: C, ctx: DecideContext) => Decision<E> | Rejection
  /**
   * One of this aggregate's effects changed state (performed, failed, requeued). Runs in the same
   * transaction as the outbox row's update, so the domain records the result exactly once; it may
   * decide follow-up events and effects. A rejection here records nothing in the domain.
   */
  readonly onOutcome: ((state: S, outcome: EffectOutcome, ctx: DecideContext) => Decision<E> | Rejection) | undefined
  /**
   * A running effect of this aggregate recorded a chunk of its stream (StreamChunks, StreamIngest).
   * Runs in the chunk's transaction, so a projection of it is never ahead of or behind the chunk
   * table. Optional: without it the chunk is the engine's record only. A rejection projects nothing;
   * the chunk still lands.
   */
  readonly onStream?: ((state: S, chunk: StreamChunkNotice, ctx: DecideContext) => Decision<E> | Rejection) | undefined
  /**
   * One of this aggregate's timers could not fire: its command was refused for good, or is not
   * readable (TimerFailures.ts). The timer is failed either way; this lets the domain record it or
   * schedule again, so a chain built on timers does not stop in silence. Optional: without it
   * nothing is recorded in the domain. A rejection records nothing.
   */
  readonly onTimerFailed?:
    | ((state: S, failure: TimerFailure, ctx: DecideContext) => Decision<E> | Rejection)
    | undefined
  /** Version written with new events; bump it when the event shapes change and upcast old ones. */
  readonly eventSchemaVersion: number
  /** Turns a stored payload of an older schema version into the current encoded shape. */
  readonly upcast: (stored: {
    readonly type: string
    readonly payload: unknown
    readonly schemaVersion: number
  }) => unknown
}

export type AnyAggregate = AggregateDefinition<any, any, any>

type CommandOf<Cmds extends { readonly [type: string]: Schema.Schema<any, any, never> }> = {
  [K in keyof Cmds]: Schema.Schema.Type<Cmds[K]>
}[keyof Cmds]

export const make = <
  S,
  const Cmds extends { readonly [type: string]: Schema.Schema<any, any, never> },
  E extends { readonly type: string }
>(definition: {
  readonly name: string
  readonly commands: Cmds
  readonly events: Schema.Schema<E, any, never>
  readonly aggregateId: (command: CommandOf<Cmds>) => string
  readonly initialState: S
  readonly evolve: (state: S, event: E) => S
  readonly decide: (state: S, command: CommandOf<Cmds>, ctx: DecideContext) => Decision<E> | Rejection
  readonly onOutcome?: (state: S, outcome: EffectOutcome, ctx: DecideContext) => Decision<E> | Rejection
  readonly onStream?: (state: S, chunk: StreamChunkNotice, ctx: DecideContext) => Decision<E> | Rejection
  readonly onTimerFailed?: (state: S, failure: TimerFailure, ctx: DecideContext) => Decision<E> | Rejection
  readonly eventSchemaVersion?: number
  readonly upcast?: (stored: {
    readonly type: string
    readonly payload: unknown
    readonly schemaVersion: number
  }) => unknown
}): AggregateDefinition<S, CommandOf<Cmds> & { readonly type: string; readonly commandId: string }, E> => ({
  ...definition,
  commands: definition.commands as any,
  onOutcome: definition.onOutcome,
  onStream: definition.onStream,
  onTimerFailed: definition.onTimerFailed,
  eventSchemaVersion: definition.eventSchemaVersion ?? 1,
  upcast: definition.upcast ?? ((stored) => stored.payload)
})

/** A command schema: `{ commandId, type, ...fields }`, the shape clients send. */
export const command = <const T extends string, F extends Schema.Struct.Fields>(type: T, fields: F) =>
  Schema.Struct({ commandId: Schema.String, type: Schema.Literal(type), ...fields })

/** An event schema: `{ type, ...fields }`. */
export const event = <const T extends string, F extends Schema.Struct.Fields>(type: T, fields: F) =>
  Schema.Struct({ type: Schema.Literal(type), ...fields })
