/**
 * Peer: @effect/workflow on @effect/cluster's SingleRunner with SQL message storage on SQLite (WAL,
 * the client's default synchronous=FULL) — what an Effect user would pick instead. One workflow per
 * command (idempotency key = command id) with one Activity as the effect; `execute` answers when the
 * workflow's result is stored, the same point as our outcome commit.
 */
import { ClusterWorkflowEngine, SingleRunner } from "@effect/cluster"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Activity, Workflow } from "@effect/workflow"
import { Effect, Layer, Schema } from "effect"
import { join } from "node:path"
import { runBench } from "./EngineStack.js"
import { closedLoopEffect, type RunResult } from "./Stats.js"

const Command = Workflow.make({
  name: "BenchCommand",
  payload: { commandId: Schema.String, n: Schema.Number },
  success: Schema.Number,
  idempotencyKey: ({ commandId }) => commandId
})

const CommandLive = Command.toLayer(
  Effect.fn(function* (payload) {
    return yield* Activity.make({ name: "Effect", success: Schema.Number, execute: Effect.succeed(payload.n) })
  })
)

export const runWorkflow = (dir: string, clients: number, ops: number): Promise<RunResult> =>
  runBench(
    Effect.gen(function* () {
      const context = yield* Layer.build(
        CommandLive.pipe(
          Layer.provideMerge(ClusterWorkflowEngine.layer),
          Layer.provideMerge(SingleRunner.layer({ runnerStorage: "sql" })),
          Layer.provideMerge(SqliteClient.layer({ filename: join(dir, "workflow.db") }))
        )
      )
      const execute = (id: string, n: number) => Command.execute({ commandId: id, n }).pipe(Effect.provide(context))
      yield* Effect.forEach(
        Array.from({ length: clients }, (_, c) => c),
        (c) => execute(`warm-${c}`, c),
        { concurrency: "unbounded", discard: true }
      )
      return yield* closedLoopEffect(clients, ops, (i) => execute(`run-${i}`, i))
    })
  )
