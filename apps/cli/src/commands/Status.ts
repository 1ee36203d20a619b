/** `orchestrator status`: GET /health as a readable report. Exit 1 when the server says unavailable. */
import { Command } from "@effect/cli"
import type { Api } from "@orchestration/server"
import { Effect } from "effect"
import { Unhealthy } from "../CliErrors.js"
import * as Connection from "../Connection.js"
import * as Render from "../Render.js"
import * as ServerClient from "../ServerClient.js"

export const renderHealth = (url: string, report: Api.HealthReport): string =>
  [
    Render.fields([
      ["server", url],
      ["status", report.status],
      [
        "engine",
        `${report.engine.active ? "active" : "not active"}, log head ${report.engine.head}, queue ${report.engine.queueDepth}`
      ],
      [
        "store",
        `${report.storage.writable ? "writable" : "NOT WRITABLE"}, free ${Render.bytes(report.storage.freeBytes)}, floor ${Render.bytes(report.storage.floorBytes)}` +
          (report.storage.freeBytes < report.storage.floorBytes ? " (BELOW THE FLOOR)" : "")
      ],
      [
        "database",
        `${report.database.backend}, ${report.database.connected ? `answers in ${Render.duration(report.database.latencyMs)}` : "NOT ANSWERING"}, ` +
          `${report.database.acceptsWrites ? "takes writes" : "TAKES NO WRITES"}, node ${report.database.nodeId}, ` +
          `${report.database.liveOwners.length} live worker(s)`
      ],
      [
        "outbox",
        `${report.outbox.pending} pending, ${report.outbox.running} running, ${report.outbox.failed} failed` +
          (report.outbox.quarantined > 0
            ? `, ${report.outbox.quarantined} QUARANTINED (orchestrator effects list --status quarantined; release or fail each)`
            : ", 0 quarantined")
      ]
    ]),
    "",
    report.reactors.length === 0
      ? "reactors: none"
      : Render.table(
          ["REACTOR", "LAG", "OLDEST PENDING"],
          report.reactors.map((r) => [
            r.name,
            String(r.lag),
            r.oldestPendingAgeMs === 0 ? "-" : Render.duration(r.oldestPendingAgeMs)
          ])
        ),
    // The domain's components (each MCP server): one that is not up is why the status is degraded.
    ...(report.components.length === 0
      ? []
      : [
          "",
          Render.table(
            ["COMPONENT", "STATUS", "DETAIL"],
            report.components.map((c) => [c.name, c.status === "ok" ? "ok" : "DEGRADED", c.message])
          )
        ])
  ].join("\n")

export const status = Command.make("status", Connection.connectionOptions, (options) =>
  Effect.gen(function* () {
    const connection = yield* Connection.resolve(options)
    const report = yield* ServerClient.health(connection)
    yield* Render.output(connection.json, report, (r) => renderHealth(connection.url, r))
    if (report.status === "unavailable") {
      return yield* new Unhealthy({ message: "the server reports itself unavailable" })
    }
  })
).pipe(
  Command.withDescription(
    "Show the server's health: status, engine, store and disk floor, database, outbox counts, reactor lag, the domain's components such as MCP servers (GET /health). Exit 1 when unavailable."
  )
)
