/**
 * The simulated clients: one fiber per thread plays its plan through the engine's front door. Their
 * memory (what was acknowledged, which action is next) lives outside the engine's runtime, so it
 * survives a crash, and an action cut off by one is sent again under the same command id, as a real
 * client retries after an unknown outcome.
 */
import { Engine } from "@orchestration/engine"
import { Effect } from "effect"
import type { Rng } from "./Rng.js"
import type { FaultLog } from "./SimFaults.js"
import type { Trace } from "./Trace.js"
import type { Violation } from "./Violation.js"
import type { ClientPlan, Single } from "./Workload.js"

export interface Ack {
  readonly sequence: number
  readonly effectIds: ReadonlyArray<string>
  readonly events: number
  readonly text: string
}

export interface ClientMemory {
  /** The next action of each thread's plan. */
  readonly next: Map<string, number>
  readonly acked: Map<string, Ack>
  /** Refusals the clients saw (StorageFailure, EngineUnavailable): each one visible, typed. */
  refusals: number
}

export const emptyMemory = (): ClientMemory => ({ next: new Map(), acked: new Map(), refusals: 0 })

const commandOf = (action: Single) => {
  switch (action.type) {
    case "send":
    case "duplicate":
    case "conflict":
      return {
        commandId: `send-${action.threadId}-${action.messageId}`,
        type: "message.send",
        threadId: action.threadId,
        messageId: action.messageId,
        text: action.text
      }
    case "interrupt":
      return {
        commandId: `int-${action.threadId}-${action.messageId}`,
        type: "turn.interrupt",
        threadId: action.threadId,
        turnId: `${action.threadId}:${action.messageId}`
      }
  }
}

const retryable = new Set(["StorageFailure", "EngineUnavailable", "AggregateUnavailable"])

/** Plays one action to its answer, retrying refusals; a broken promise is reported as a violation. */
const play = (action: Single, memory: ClientMemory, faults: FaultLog, rng: Rng, trace: Trace) =>
  Effect.gen(function* () {
    const engine = yield* Engine.Engine
    const command = commandOf(action)
    const text = "text" in command ? command.text : ""
    for (;;) {
      const hitsBefore = faults.hits.get(command.commandId) ?? 0
      const result = yield* Effect.either(engine.dispatchWithReceipt(command))
      if (result._tag === "Right") {
        const answer = result.right
        trace.add("ack", `${command.commandId} seq=${answer.sequence} dup=${answer.duplicate}`)
        const earlier = memory.acked.get(command.commandId)
        if (action.type === "conflict")
          return {
            invariant: "retry-applied-twice",
            detail: `a conflicting retry of ${command.commandId} was accepted`
          }
        if (earlier !== undefined) {
          if (
            earlier.text !== text ||
            earlier.sequence !== answer.sequence ||
            earlier.effectIds.join() !== answer.effectIds.join() ||
            !answer.duplicate
          )
            return {
              invariant: "retry-applied-twice",
              detail: `${command.commandId} answered seq ${answer.sequence} dup=${answer.duplicate}, first seq ${earlier.sequence}`
            }
        } else {
          memory.acked.set(command.commandId, {
            sequence: answer.sequence,
            effectIds: answer.effectIds,
            events: answer.events.length,
            text
          })
        }
        // A write refused during this dispatch and yet acknowledged must be durable right now.
        if ((faults.hits.get(command.commandId) ?? 0) > hitsBefore) {
          const receipt = yield* Effect.either(engine.receipt(command.commandId))
          if (receipt._tag === "Right" && receipt.right._tag === "None")
            return {
              invariant: "refused-write-hidden",
              detail: `${command.commandId}: a write was refused, the client was told it was accepted, and no receipt exists`
            }
        }
        return undefined
      }
      const error = result.left
      trace.add("refused", `${command.commandId} ${error._tag}`)
      if (retryable.has(error._tag)) {
        memory.refusals++
        yield* Effect.sleep(500 + rng.int(5_000))
        continue
      }
      if (error._tag === "CommandIdConflict" && action.type === "conflict") return undefined
      if (error._tag === "CommandRejected") return undefined
      return { invariant: "unexpected-error", detail: `${command.commandId}: ${error._tag}: ${error.message}` }
    }
  })

/** One thread's client: its remaining actions, in order, each after its pause. */
export const run = (
  plan: ClientPlan,
  memory: ClientMemory,
  faults: FaultLog,
  rng: Rng,
  trace: Trace,
  report: (violation: Violation) => void
) =>
  Effect.gen(function* () {
    for (let i = memory.next.get(plan.threadId) ?? 0; i < plan.actions.length; i++) {
      const step = plan.actions[i]!
      yield* Effect.sleep(step.pauseMs)
      // A burst's sends go at once, each to its own answer (a crash in between plays them all again,
      // as retries under the same ids).
      const violations =
        step.action.type === "burst"
          ? yield* Effect.forEach(step.action.sends, (send) => play(send, memory, faults, rng, trace), {
              concurrency: "unbounded"
            })
          : [yield* play(step.action, memory, faults, rng, trace)]
      for (const violation of violations) if (violation !== undefined) report(violation as Violation)
      memory.next.set(plan.threadId, i + 1)
    }
  })
