/**
 * Every effect kind's payload, as its real decider writes it, goes through JSON as the outbox stores
 * it (CanonicalJson) and decodes with the schema its handler reads it with (AgentReactor.payloadSchemas),
 * whole: a writer and a schema that drift apart (a field renamed, added on one side only) fail here,
 * not in production as a row failed `payload-undecodable` or a field silently dropped. Pure: the
 * deciders run on state folded from events that went through JSON and the event schema too.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  type AggregateDefinition,
  CanonicalJson,
  type DecideContext,
  type Decision,
  type EffectIntent,
  type EffectOutcome,
  StoredJson
} from "@orchestration/engine"
import { Schema } from "effect"
import { payloadSchemas } from "../src/AgentReactor.js"
import { delegationCommandId } from "../src/Delegation.js"
import { makeThread, ThreadEvent } from "../src/Thread.js"
import * as Trigger from "../src/Trigger.js"
import { type EffectKind, toolPolicies } from "../src/Tools.js"

const ctxOf = (aggregateId: string, commandId: string, now = 1_000): DecideContext => ({
  commandId,
  aggregateId,
  now,
  deriveId: (key) => `${commandId}:${key}`
})

/** A stored value read back: the store writes canonical JSON. */
const throughJson = (value: unknown): unknown => JSON.parse(CanonicalJson.canonicalJson(value))

/** Asserts the effect's payload, read back from the store, decodes whole with its handler's schema. */
const assertRoundTrips = (effect: EffectIntent) => {
  const schema = payloadSchemas[effect.kind as EffectKind] as Schema.Schema<unknown, unknown, never> | undefined
  if (schema === undefined) return assert.fail(`no handler schema for kind ${effect.kind}`)
  const stored = throughJson(effect.payload)
  const read = StoredJson.decoder(schema)(stored, `${effect.kind} payload`)
  if (!read.ok) return assert.fail(`${effect.id}: ${read.why}`)
  // Whole: a field the writer adds and the schema does not know would be dropped before the handler.
  assert.deepStrictEqual(read.value, stored, `${effect.kind}: a written field the handler never sees`)
}

/**
 * An aggregate driven as the engine drives it: each decision's events are stored (JSON, decoded with
 * the event schema) and folded in; each written effect is checked and remembered by kind.
 */
const driven = <S, C extends { readonly type: string; readonly commandId: string }>(
  aggregate: AggregateDefinition<S, C, any>,
  events: Schema.Schema<any, any, never>
) => {
  const decodeEvent = Schema.decodeUnknownSync(events)
  let state = aggregate.initialState
  const effects: Array<EffectIntent> = []
  const apply = (answer: Decision<unknown> | { readonly _tag: "Rejection"; readonly message: string }) => {
    if (answer._tag === "Rejection") return assert.fail(`rejected: ${answer.message}`)
    for (const event of answer.events) state = aggregate.evolve(state, decodeEvent(throughJson(event)))
    for (const effect of answer.effects) assertRoundTrips(effect)
    effects.push(...answer.effects)
    return answer
  }
  return {
    effects,
    decide: (command: C, ctx: DecideContext) => apply(aggregate.decide(state, command, ctx)),
    outcome: (outcome: EffectOutcome, ctx: DecideContext) => apply(aggregate.onOutcome!(state, outcome, ctx)),
    /** The effect of this kind the aggregate wrote last. */
    last: (kind: EffectKind) => {
      const effect = [...effects].reverse().find((e) => e.kind === kind)
      if (effect === undefined) return assert.fail(`no ${kind} effect was written`)
      return effect
    }
  }
}

type ThreadCommand = Parameters<ReturnType<typeof makeThread>["decide"]>[1]

const succeeded = (effect: EffectIntent, response: unknown): EffectOutcome => ({
  effectId: effect.id!,
  kind: effect.kind,
  payload: throughJson(effect.payload),
  attempt: 1,
  status: "succeeded",
  by: "reactor",
  response
})

const send = (threadId: string, messageId: string, text: string): ThreadCommand => ({
  commandId: `send-${messageId}`,
  type: "message.send",
  threadId,
  messageId,
  text
})

/** A step's response with a call of every tool, the MCP one as an offered tool of a server. */
const everyTool = {
  text: "",
  toolCalls: [
    { id: "p", name: "publish", arguments: { path: "a.md", content: "x" } },
    { id: "x", name: "execute", arguments: { command: "true" } },
    { id: "e", name: "trigger_edit", arguments: { triggerId: "daily", spec: null } },
    {
      id: "m",
      name: "fs__write",
      arguments: { path: "b" },
      mcp: { server: "fs", tool: "write", onProcessLoss: "process-bound" }
    },
    { id: "d", name: "delegate", arguments: { threadId: "t2", text: "summarise", await: true } }
  ]
}

/** A thread's turn: its model step, a call of every tool (an awaited delegate chained), the withdraw of its end, the cleanup of its delete. */
const aTurn = () => {
  const t1 = driven(makeThread(), ThreadEvent)
  t1.decide(send("t1", "m1", "go"), ctxOf("t1", "send-m1"))
  t1.outcome(succeeded(t1.last("model.step"), everyTool), ctxOf("t1", "outcome:step#1"))
  assert.deepStrictEqual(
    t1.effects.map((e) => e.kind),
    ["model.step", "tool.publish", "tool.execute", "tool.trigger_edit", "tool.mcp_call", "tool.delegate"]
  )
  assert.deepStrictEqual((t1.last("tool.delegate").payload as { awaitChain?: unknown }).awaitChain, ["t1"])
  // The delegate's message was accepted: the call waits; the turn's end withdraws what it awaited.
  t1.outcome(
    succeeded(t1.last("tool.delegate"), { threadId: "t2", awaiting: true, turnId: "t2:d-1" }),
    ctxOf("t1", "outcome:delegate#1")
  )
  t1.decide({ commandId: "stop", type: "turn.interrupt", threadId: "t1", turnId: "t1:m1" }, ctxOf("t1", "stop"))
  t1.last("delegate.withdraw")
  t1.decide({ commandId: "del", type: "thread.delete", threadId: "t1" }, ctxOf("t1", "del"))
  t1.last("thread.cleanup")
  return t1.effects
}

/** An awaited turn's end: the reply to its waiting call. */
const anAwaitedTurn = () => {
  const t2 = driven(makeThread(), ThreadEvent)
  const awaitedBy = { threadId: "t1", turnId: "t1:m1", effectId: "tool:t1:m1:d", chain: ["t1"] }
  t2.decide(
    { ...send("t2", "d-1", "summarise"), awaitedBy } as ThreadCommand,
    ctxOf("t2", delegationCommandId("tool:t1:m1:d"))
  )
  t2.outcome(succeeded(t2.last("model.step"), { text: "summary", toolCalls: [] }), ctxOf("t2", "outcome:step#1"))
  t2.last("delegate.reply")
  return t2.effects
}

/** An approved delegate: written from its stored request (through JSON with its event), chained then. */
const anApprovedDelegate = () => {
  const t3 = driven(makeThread({ approval: { mode: "required", tools: ["delegate"], timeoutMs: 60_000 } }), ThreadEvent)
  t3.decide(send("t3", "m1", "go"), ctxOf("t3", "send-m1"))
  t3.outcome(
    succeeded(t3.last("model.step"), {
      text: "",
      toolCalls: [{ id: "d", name: "delegate", arguments: { threadId: "t2", text: "x", await: true } }]
    }),
    ctxOf("t3", "outcome:step#1")
  )
  assert.deepStrictEqual(
    t3.effects.map((e) => e.kind),
    ["model.step"],
    "the delegate waits for approval"
  )
  t3.decide({ commandId: "approve", type: "tool.approve", threadId: "t3", callId: "d" }, ctxOf("t3", "approve"))
  assert.deepStrictEqual((t3.last("tool.delegate").payload as { awaitChain?: unknown }).awaitChain, ["t3"])
  return t3.effects
}

/** A trigger's due tick: the message it sends. */
const aDueTick = () => {
  const daily = driven(Trigger.Trigger as AggregateDefinition<Trigger.TriggerState, any, any>, Trigger.TriggerEvent)
  const put = daily.decide(
    { commandId: "put", type: "trigger.put", triggerId: "daily", cron: "0 9 * * *", threadId: "t1", text: "check" },
    ctxOf("daily", "put")
  )
  const at = put.timers![0]!.at
  daily.decide(
    { commandId: "timer:tick", type: "trigger.tick", triggerId: "daily", at },
    ctxOf("daily", "timer:tick", at)
  )
  daily.last("trigger.fire")
  return daily.effects
}

const scenarios = [
  ["a thread's turn: its model step, a call of every tool, the withdraw of its end, the cleanup of its delete", aTurn],
  ["an awaited turn's end: the reply to its waiting call", anAwaitedTurn],
  ["an approved delegate: written from its stored request, chained", anApprovedDelegate],
  ["a trigger's due tick: the message it sends", aDueTick]
] as const

describe("every effect kind's payload, as its decider writes it, decodes whole with its handler's schema after the store", () => {
  for (const [name, scenario] of scenarios) it(name, () => void scenario())

  it("the scenarios write every kind of the table", () => {
    const written = new Set(scenarios.flatMap(([, scenario]) => scenario().map((e) => e.kind)))
    assert.deepStrictEqual([...written].sort(), Object.keys(toolPolicies).sort())
  })
})
