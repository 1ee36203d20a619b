/**
 * `orchestrator timers list`: the engine's durable timers (GET /v1/timers), failed ones unless
 * another status is named. A failed timer can never fire (its command refused for good, unreadable,
 * or throwing in its aggregate's code at every try); the list says why, as its aggregate was told,
 * so an operator need not search the server's log. This only reads: a timer is moved or cancelled
 * by its aggregate's commands.
 */
import { Command, Options } from "@effect/cli"
import type { Api } from "@orchestration/server"
import * as Render from "../Render.js"
import { serverCommand } from "../ServerCommand.js"

type TimerView = typeof Api.TimerView.Type

const statuses = ["failed", "pending", "fired", "cancelled"] as const

/** One line a timer: the failure's message cut to fit a terminal; `--json` has it whole. */
export const renderTimers = (list: { readonly timers: ReadonlyArray<TimerView> }): string =>
  list.timers.length === 0
    ? "no timers"
    : Render.table(
        ["AGGREGATE", "TIMER", "GEN", "STATUS", "DUE", "UPDATED", "REASON", "MESSAGE"],
        list.timers.map((t) => [
          `${t.aggregateType}/${t.aggregateId}`,
          t.timerId,
          String(t.generation),
          t.status,
          Render.time(t.dueAt),
          Render.time(t.updatedAt),
          t.failure?.reason ?? "-",
          t.failure === null ? "-" : Render.compact(t.failure.message, 120)
        ])
      )

const list = serverCommand(
  "list",
  {
    status: Options.choice("status", statuses).pipe(
      Options.withDescription("Only timers in this status."),
      Options.withDefault("failed" as const)
    ),
    limit: Options.integer("limit").pipe(
      Options.withDescription("At most this many timers, most recently changed first (1-1000)."),
      Options.withDefault(100)
    )
  },
  {
    ask: (api, options) => api.timers.list({ urlParams: { status: options.status, limit: options.limit } }),
    render: renderTimers,
    description:
      "List durable timers, most recently changed first; by default the failed ones, with why each could not fire (GET /v1/timers)."
  }
)

export const timers = Command.make("timers").pipe(
  Command.withDescription("Durable timers: list the ones that can never fire, and why."),
  Command.withSubcommands([list])
)
