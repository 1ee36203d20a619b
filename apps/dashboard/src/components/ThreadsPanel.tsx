/**
 * The thread list: one page at a time from GET /v1/threads (newest first), a status filter, and
 * Older/Newer paging by cursor, so thousands of threads never load at once. Each row shows its
 * latest turn, that turn's age, and a stuck flag when a running turn's thread has been silent for
 * longer than the page's limit.
 */
import type { ThreadPage } from "../api.js"
import { formatAge, formatAgo, formatCount, isStuck } from "../format.js"
import { StatusBadge, StuckBadge } from "./Badges.js"
import { num, Table } from "./Table.js"

export const threadFilters = ["all", "running", "idle", "deleted"] as const
export type ThreadFilter = (typeof threadFilters)[number]

export interface ThreadsPanelProps {
  readonly page: ThreadPage | undefined
  readonly filter: ThreadFilter
  readonly pageNumber: number
  readonly now: number
  readonly stuckAfterMs: number
  readonly onFilter: (filter: ThreadFilter) => void
  readonly onOlder: (() => void) | undefined
  readonly onNewer: (() => void) | undefined
  readonly onOpen: (threadId: string) => void
}

export const ThreadsPanel = (props: ThreadsPanelProps) => {
  const { now, page, stuckAfterMs } = props
  const counts = page?.counts ?? {}
  const total = Object.values(counts).reduce((a, b) => a + b, 0)
  return (
    <section class="panel" data-testid="threads">
      <header class="panel-head">
        <h2>Threads</h2>
        <nav class="tabs" aria-label="thread status">
          {threadFilters.map((filter) => (
            <button
              type="button"
              class={filter === props.filter ? "tab active" : "tab"}
              data-testid={`filter-${filter}`}
              onClick={() => props.onFilter(filter)}
            >
              {filter}
              <span class="tab-count">{formatCount(filter === "all" ? total : (counts[filter] ?? 0))}</span>
            </button>
          ))}
        </nav>
      </header>
      <Table
        columns={["Thread", "Status", "Latest turn", num("Steps"), num("Turn age"), num("Last progress")]}
        empty={
          page === undefined
            ? "loading…"
            : page.threads.length === 0
              ? `no threads${props.filter === "all" ? "" : ` ${props.filter}`}`
              : undefined
        }
      >
        {page?.threads.map((thread) => {
          const turn = thread.latestTurn
          const silentFor = now - thread.lastEventAt
          const stuck = isStuck(turn?.status, thread.lastEventAt, now, stuckAfterMs)
          return (
            <tr
              key={thread.threadId}
              class={stuck ? "row stuck" : "row"}
              data-testid="thread-row"
              data-thread-id={thread.threadId}
              data-turn-status={turn?.status ?? ""}
              onClick={() => props.onOpen(thread.threadId)}
            >
              <td>
                <a
                  href={`#/threads/${encodeURIComponent(thread.threadId)}`}
                  class="mono"
                  onClick={(e) => e.stopPropagation()}
                >
                  {thread.threadId}
                </a>
                {thread.title ? <div class="muted small">{thread.title}</div> : null}
              </td>
              <td>
                <StatusBadge status={thread.status} />
              </td>
              <td>
                {turn === null ? (
                  <span class="muted">none</span>
                ) : (
                  <span class="turn">
                    <StatusBadge status={turn.status} testId="turn-status" />
                    {stuck ? <StuckBadge forMs={silentFor} format={formatAge} /> : null}
                    {thread.queuedTurns > 0 ? (
                      <span class="muted small">{` +${thread.queuedTurns} queued`}</span>
                    ) : null}
                    {turn.reason ? <div class="muted small reason">{turn.reason}</div> : null}
                  </span>
                )}
              </td>
              <td class="num">{turn?.steps ?? "–"}</td>
              <td class="num">{turn === null ? "–" : formatAge(now - turn.queuedAt)}</td>
              <td class="num">{formatAgo(silentFor)}</td>
            </tr>
          )
        })}
      </Table>
      <footer class="pager">
        <button type="button" data-testid="newer" disabled={props.onNewer === undefined} onClick={props.onNewer}>
          ← Newer
        </button>
        <span class="muted">page {props.pageNumber}</span>
        <button type="button" data-testid="older" disabled={props.onOlder === undefined} onClick={props.onOlder}>
          Older →
        </button>
      </footer>
    </section>
  )
}
