/**
 * GET /v1/timers: the engine's durable timers for an operator, failed ones by default, as the timer
 * loop left them: a failed timer carries the reason and message its aggregate was told, read from its
 * row (engine Timers.ts), so an operator needs neither the log nor the aggregate's events to see why.
 */
import { HttpApiBuilder } from "@effect/platform"
import { SqlClient } from "@effect/sql/SqlClient"
import { StorageErrors, Timers } from "@orchestration/engine"
import { Effect } from "effect"
import { fromStorageFailure } from "../ApiErrors.js"
import { ServerApi, type TimerView } from "./Api.js"

/** How many timers are listed when the client names no limit. */
export const defaultTimerPage = 100

/** The row as the route shows it: absent `failure` and `command` spelled out as null. */
export const timerView = (row: Timers.TimerRow): typeof TimerView.Type => ({
  aggregateType: row.aggregateType,
  aggregateId: row.aggregateId,
  timerId: row.timerId,
  generation: row.generation,
  dueAt: row.dueAt,
  command: row.undecodable === undefined ? row.command : null,
  ...(row.undecodable === undefined ? {} : { undecodable: row.undecodable }),
  status: row.status,
  attempts: row.attempts,
  updatedAt: row.updatedAt,
  failure: row.failure ?? null
})

export const TimersLive = HttpApiBuilder.group(ServerApi, "timers", (handlers) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    return handlers.handle("list", ({ urlParams }) =>
      Timers.list({ status: urlParams.status ?? "failed", limit: urlParams.limit ?? defaultTimerPage }).pipe(
        Effect.mapError((e) => fromStorageFailure(StorageErrors.toStorageFailure("list timers")(e))),
        Effect.map((rows) => ({ timers: rows.map(timerView) })),
        Effect.provideService(SqlClient, sql)
      )
    )
  })
)
