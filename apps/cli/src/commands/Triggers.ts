/**
 * `orchestrator triggers list`: the cron triggers with their next fire times (GET /v1/triggers). A
 * trigger is put or deleted with the `trigger.put` / `trigger.delete` commands (or the model's
 * `trigger_edit`); this only reads.
 */
import { Command, Options } from "@effect/cli"
import type { TriggerList } from "@orchestration/server"
import * as Render from "../Render.js"
import { serverCommand } from "../ServerCommand.js"

const timeOf = (iso: string | null) => Render.time(iso === null ? null : Date.parse(iso))

export const renderTriggers = (list: typeof TriggerList.Type): string =>
  list.triggers.length === 0
    ? "no triggers"
    : Render.table(
        ["TRIGGER", "CRON", "TIMEZONE", "THREAD", "NEXT FIRE", "LAST FIRED", "LAST DELIVERY"],
        list.triggers.map((t) => [
          t.triggerId,
          t.cron,
          t.timezone,
          t.threadId,
          timeOf(t.nextFireAt),
          timeOf(t.lastFiredAt),
          t.lastDelivery ?? "-"
        ])
      )

const list = serverCommand(
  "list",
  {
    limit: Options.integer("limit").pipe(
      Options.withDescription("At most this many triggers, soonest next fire first (1-1000)."),
      Options.withDefault(100)
    )
  },
  {
    ask: (api, options) => api.threads.triggers({ urlParams: { limit: options.limit } }),
    render: renderTriggers,
    description: "List the cron triggers with their next fire times (GET /v1/triggers)."
  }
)

export const triggers = Command.make("triggers").pipe(
  Command.withDescription("Cron triggers: each sends a message to its thread at the times of its cron expression."),
  Command.withSubcommands([list])
)
