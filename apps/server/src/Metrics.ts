/**
 * What the server counts itself (dispatch latency and outcomes at the edge) and the Prometheus text
 * format for /metrics. Gauges that live in the store (outbox rows, reactor lag) are read at scrape
 * time by the ops handler and rendered here; counting stays in memory because a counter that resets
 * with the process is what Prometheus expects.
 */
import { Context, Effect, Layer } from "effect"

/** Dispatch latency buckets, in seconds. */
export const latencyBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5] as const

export interface MetricsSnapshot {
  readonly latency: { readonly buckets: ReadonlyArray<number>; readonly sum: number; readonly count: number }
  readonly outcomes: ReadonlyMap<string, number>
}

export interface ServerMetricsShape {
  /** One client dispatch ended: `accepted`, `duplicate`, or the error tag answered. */
  readonly observeDispatch: (outcome: string, seconds: number) => Effect.Effect<void>
  readonly snapshot: Effect.Effect<MetricsSnapshot>
}

export class ServerMetrics extends Context.Tag("server/ServerMetrics")<ServerMetrics, ServerMetricsShape>() {}

export const make = (): ServerMetricsShape => {
  const buckets = latencyBuckets.map(() => 0)
  const outcomes = new Map<string, number>()
  let sum = 0
  let count = 0
  return {
    observeDispatch: (outcome, seconds) =>
      Effect.sync(() => {
        latencyBuckets.forEach((le, index) => {
          if (seconds <= le) buckets[index]!++
        })
        sum += seconds
        count++
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1)
      }),
    snapshot: Effect.sync(() => ({ latency: { buckets: [...buckets], sum, count }, outcomes: new Map(outcomes) }))
  }
}

export const layer = Layer.sync(ServerMetrics, make)

export interface StoreGauges {
  readonly outboxRows: ReadonlyArray<{ readonly status: string; readonly kind: string; readonly count: number }>
  readonly reactors: ReadonlyArray<{ readonly name: string; readonly lag: number; readonly oldestPendingAgeMs: number }>
  readonly reconciledAtBoot: {
    readonly requeued: number
    readonly failed: number
    readonly alreadySettled: number
    readonly quarantined: number
  }
  readonly leaseReclaims: number
  readonly head: number
  readonly queueDepth: number
}

const label = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")

/** Pure: the Prometheus text exposition (version 0.0.4). */
export const render = (metrics: MetricsSnapshot, gauges: StoreGauges): string => {
  const lines: Array<string> = []
  const family = (name: string, type: string, help: string) =>
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`)

  family("orchestration_dispatch_seconds", "histogram", "Latency of client dispatches at the HTTP edge.")
  latencyBuckets.forEach((le, index) =>
    lines.push(`orchestration_dispatch_seconds_bucket{le="${le}"} ${metrics.latency.buckets[index]}`)
  )
  lines.push(`orchestration_dispatch_seconds_bucket{le="+Inf"} ${metrics.latency.count}`)
  lines.push(
    `orchestration_dispatch_seconds_sum ${metrics.latency.sum}`,
    `orchestration_dispatch_seconds_count ${metrics.latency.count}`
  )

  family(
    "orchestration_commands_total",
    "counter",
    "Client commands by outcome (accepted, duplicate, or the error answered)."
  )
  for (const [outcome, n] of [...metrics.outcomes].sort())
    lines.push(`orchestration_commands_total{outcome="${label(outcome)}"} ${n}`)

  family("orchestration_outbox_rows", "gauge", "Outbox rows by status and kind.")
  for (const row of gauges.outboxRows) {
    lines.push(`orchestration_outbox_rows{status="${label(row.status)}",kind="${label(row.kind)}"} ${row.count}`)
  }

  family("orchestration_reactor_lag", "gauge", "Due rows of a reactor's kinds not yet settled.")
  for (const r of gauges.reactors) lines.push(`orchestration_reactor_lag{reactor="${label(r.name)}"} ${r.lag}`)
  family(
    "orchestration_reactor_oldest_pending_age_seconds",
    "gauge",
    "Age of the oldest due pending row of a reactor's kinds."
  )
  for (const r of gauges.reactors)
    lines.push(
      `orchestration_reactor_oldest_pending_age_seconds{reactor="${label(r.name)}"} ${r.oldestPendingAgeMs / 1000}`
    )

  family(
    "orchestration_lease_reclaims_total",
    "counter",
    "Dead owners' effects settled while running (since this process activated)."
  )
  lines.push(`orchestration_lease_reclaims_total ${gauges.leaseReclaims}`)

  family("orchestration_reconciled_at_boot", "gauge", "What boot reconcile settled, by result.")
  for (const [result, n] of Object.entries(gauges.reconciledAtBoot))
    lines.push(`orchestration_reconciled_at_boot{result="${result}"} ${n}`)

  family("orchestration_log_head", "gauge", "The last committed event sequence.")
  lines.push(`orchestration_log_head ${gauges.head}`)
  family("orchestration_command_queue_depth", "gauge", "Commands waiting for the processor.")
  lines.push(`orchestration_command_queue_depth ${gauges.queueDepth}`)
  return `${lines.join("\n")}\n`
}
