/** The overview's headline numbers (threads, stuck turns, effects, the log) and its rolling charts. */
import type { OutboxSummary, ThreadPage } from "../api.js"
import { formatAge, formatCount, formatRate, isStuck } from "../format.js"
import { lagSeries, rateSeries, type Sample } from "../samples.js"
import { Sparkline } from "./Sparkline.js"

/** How many of the longest-running threads the stuck count looks at. */
export const stuckScan = 100
const chartWindowMs = 5 * 60_000

export interface OverviewCardsProps {
  readonly page: ThreadPage | undefined
  /** The longest-running threads, for the stuck count whatever page is on screen. */
  readonly longestRunning: ThreadPage | undefined
  readonly summary: OutboxSummary | undefined
  readonly samples: ReadonlyArray<Sample>
  readonly now: number
  readonly stuckAfterMs: number
  readonly onShowStuck: () => void
}

export const OverviewCards = ({
  page,
  longestRunning,
  summary,
  samples,
  now,
  stuckAfterMs,
  onShowStuck
}: OverviewCardsProps) => {
  const stuckThreads = (longestRunning?.threads ?? []).filter((t) =>
    isStuck(t.latestTurn?.status, t.lastEventAt, now, stuckAfterMs)
  )
  const stuckAtLeast = stuckThreads.length === stuckScan && longestRunning?.next !== null
  const longestTurn = longestRunning?.threads[0]?.latestTurn
  const threadCounts = page?.counts ?? {}
  const totalThreads = Object.values(threadCounts).reduce((a, b) => a + b, 0)
  const outboxCount = (status: string) =>
    (summary?.rows ?? []).filter((r) => r.status === status).reduce((a, r) => a + r.count, 0)
  const eventsRate = rateSeries(samples, (s) => s.head)
  const settledRate = rateSeries(samples, (s) => s.settled)
  return (
    <>
      <section class="cards">
        <div class="card">
          <div class="card-label">Threads</div>
          <div class="card-value" data-testid="threads-total">
            {page === undefined ? "–" : formatCount(totalThreads)}
          </div>
          <div class="card-sub">{formatCount(threadCounts.running ?? 0)} running</div>
        </div>
        <button
          type="button"
          class={stuckThreads.length > 0 ? "card card-bad card-button" : "card card-button"}
          data-testid="stuck-card"
          title="Show running threads, longest-running first"
          onClick={onShowStuck}
        >
          <div class="card-label">Stuck turns</div>
          <div class="card-value" data-testid="stuck-total">
            {longestRunning === undefined ? "–" : `${stuckAtLeast ? "≥ " : ""}${formatCount(stuckThreads.length)}`}
          </div>
          <div class="card-sub">
            silent &gt; {formatAge(stuckAfterMs)} · longest turn{" "}
            {longestTurn === undefined || longestTurn === null ? "–" : formatAge(now - longestTurn.queuedAt)}
          </div>
        </button>
        <div class="card">
          <div class="card-label">Effects waiting</div>
          <div class="card-value">{formatCount(outboxCount("pending") + outboxCount("running"))}</div>
          <div class="card-sub">
            {formatCount(outboxCount("pending"))} pending · {formatCount(outboxCount("running"))} running
          </div>
        </div>
        <div class={outboxCount("failed") > 0 ? "card card-bad" : "card"}>
          <div class="card-label">Failed effects</div>
          <div class="card-value" data-testid="failed-total">
            {formatCount(outboxCount("failed"))}
          </div>
          <div class="card-sub">
            oldest due pending{" "}
            {summary === undefined || summary.oldestPendingAgeMs === 0 ? "–" : formatAge(summary.oldestPendingAgeMs)}
          </div>
        </div>
        <div class="card">
          <div class="card-label">Event log</div>
          <div class="card-value">{summary === undefined ? "–" : formatCount(summary.head)}</div>
          <div class="card-sub">{formatRate(eventsRate.at(-1)?.value ?? 0)} events/s</div>
        </div>
      </section>

      <section class="charts">
        {[
          {
            title: "Reactor lag (due rows unsettled)",
            points: lagSeries(samples),
            format: (v: number) => formatCount(Math.round(v)),
            unit: "",
            color: "#d97706",
            testId: "chart-lag"
          },
          {
            title: "Events committed",
            points: eventsRate,
            format: formatRate,
            unit: " /s",
            color: "#2563eb",
            testId: "chart-events"
          },
          {
            title: "Effects settled",
            points: settledRate,
            format: formatRate,
            unit: " /s",
            color: "#059669",
            testId: "chart-settled"
          }
        ].map((chart) => (
          <Sparkline key={chart.testId} {...chart} windowMs={chartWindowMs} />
        ))}
      </section>
    </>
  )
}
