/**
 * The dashboard: one page over the server's API. It samples /v1/outbox/summary every two seconds
 * (the charts keep a rolling window of those readings), reads one page of threads at a time, and
 * follows the event stream so a change shows without a reload: an event of a thread on screen
 * re-reads that thread's row or view shortly after. Any 401 brings up the token prompt.
 */
import { useCallback, useEffect, useRef, useState } from "preact/hooks"
import {
  type ComponentHealth,
  type EffectRow,
  getApprovals,
  getComponents,
  getSummary,
  getThread,
  getThreadEffects,
  getThreads,
  type OutboxSummary,
  type PendingApproval,
  type ThreadDetail,
  type ThreadPage,
  Unauthorized,
  ApiError
} from "./api.js"
import { follow, type StreamEvent, type StreamState } from "./eventStream.js"
import { formatAge, formatAgo, formatCount, formatRate, isStuck } from "./format.js"
import { addSample, lagSeries, rateSeries, type Sample, windowMs } from "./samples.js"
import { clearToken, readToken, saveToken } from "./token.js"
import { ApprovalsPanel } from "./components/ApprovalsPanel.js"
import { OutboxPanel } from "./components/OutboxPanel.js"
import { Sparkline } from "./components/Sparkline.js"
import { type ThreadFilter, ThreadsPanel } from "./components/ThreadsPanel.js"
import { ThreadView } from "./components/ThreadView.js"
import { TokenPrompt } from "./components/TokenPrompt.js"

const pageSize = 50
/** How many of the longest-running threads the stuck count looks at. */
const stuckScan = 100
const summaryEveryMs = 2000
const threadsEveryMs = 5000
const threadEveryMs = 2000
/** Events arrive in bursts (a turn is several): re-read once the burst has passed. */
const settleMs = 250
const chartWindowMs = 5 * 60_000
const stuckKey = "orchestration.stuckAfterSeconds"

type Route = { readonly view: "overview" } | { readonly view: "thread"; readonly threadId: string }

const routeOf = (hash: string): Route => {
  const match = /^#\/threads\/(.+)$/.exec(hash)
  return match === null ? { view: "overview" } : { view: "thread", threadId: decodeURIComponent(match[1]!) }
}

const useHashRoute = (): Route => {
  const [route, setRoute] = useState(() => routeOf(location.hash))
  useEffect(() => {
    const onChange = () => setRoute(routeOf(location.hash))
    addEventListener("hashchange", onChange)
    return () => removeEventListener("hashchange", onChange)
  }, [])
  return route
}

const initialStuckSeconds = () => {
  const stored = Number(localStorage.getItem(stuckKey))
  return Number.isFinite(stored) && stored > 0 ? stored : 60
}

export const App = () => {
  const route = useHashRoute()
  const threadId = route.view === "thread" ? route.threadId : undefined

  const [needToken, setNeedToken] = useState(false)
  const [tokenRefused, setTokenRefused] = useState(false)
  const [connection, setConnection] = useState(0)
  const [notice, setNotice] = useState<string | undefined>(undefined)
  const [components, setComponents] = useState<ReadonlyArray<ComponentHealth>>([])

  const [summary, setSummary] = useState<OutboxSummary | undefined>(undefined)
  const [samples, setSamples] = useState<ReadonlyArray<Sample>>([])
  const offset = useRef(0)
  const [now, setNow] = useState(() => Date.now())

  const [filter, setFilter] = useState<ThreadFilter>("all")
  const [cursors, setCursors] = useState<ReadonlyArray<number | undefined>>([undefined])
  const [page, setPage] = useState<ThreadPage | undefined>(undefined)

  const [detail, setDetail] = useState<ThreadDetail | undefined>(undefined)
  const [effects, setEffects] = useState<ReadonlyArray<EffectRow>>([])
  const [missing, setMissing] = useState(false)

  const [stream, setStream] = useState<StreamState>("connecting")
  const [recent, setRecent] = useState<ReadonlyArray<StreamEvent>>([])
  const [stuckSeconds, setStuckSeconds] = useState(initialStuckSeconds)

  const onError = useCallback((error: unknown) => {
    if (error instanceof Unauthorized) {
      // An answer to an older token (one already replaced) says nothing about the current one.
      if (error.token !== readToken()) return
      if (error.token !== undefined) setTokenRefused(true)
      clearToken()
      setNeedToken(true)
      return
    }
    setNotice(error instanceof Error ? error.message : String(error))
  }, [])

  const authorized = !needToken

  // ---- the outbox summary, sampled -------------------------------------------------------------
  const [approvals, setApprovals] = useState<ReadonlyArray<PendingApproval>>([])
  const refreshSummary = useCallback(() => {
    // swallow-ok: the components banner is advisory; the summary below reports a server that does not answer.
    getComponents().then(setComponents, () => undefined)
    // Sampled with the summary (and after each burst of events), so a waiting call shows within seconds.
    getApprovals().then(setApprovals, onError)
    getSummary().then((s) => {
      offset.current = s.at - Date.now()
      setSummary(s)
      setSamples((previous) =>
        addSample(
          previous,
          {
            at: s.at,
            head: s.head,
            settled: s.settled,
            lag: s.reactors.reduce((sum, r) => sum + r.lag, 0),
            oldestPendingAgeMs: s.oldestPendingAgeMs
          },
          windowMs
        )
      )
    }, onError)
  }, [onError])

  useEffect(() => {
    if (!authorized) return
    refreshSummary()
    const timer = setInterval(refreshSummary, summaryEveryMs)
    return () => clearInterval(timer)
  }, [authorized, connection, refreshSummary])

  // Ages tick every second, on the server's clock.
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now() + offset.current), 1000)
    return () => clearInterval(timer)
  }, [])

  // ---- the thread list, one page ---------------------------------------------------------------
  const cursor = cursors[cursors.length - 1]
  const refreshThreads = useCallback(() => {
    // Running threads oldest first: the longest-running turns, the likeliest to be stuck, lead.
    getThreads({
      limit: pageSize,
      after: cursor,
      status: filter === "all" ? undefined : filter,
      order: filter === "running" ? "oldest" : undefined
    }).then(setPage, onError)
  }, [cursor, filter, onError])

  // The longest-running threads, for the stuck count whatever page is on screen.
  const [longestRunning, setLongestRunning] = useState<ThreadPage | undefined>(undefined)
  const refreshLongestRunning = useCallback(() => {
    getThreads({ limit: stuckScan, status: "running", order: "oldest" }).then(setLongestRunning, onError)
  }, [onError])
  useEffect(() => {
    if (!authorized) return
    refreshLongestRunning()
    const timer = setInterval(refreshLongestRunning, threadsEveryMs)
    return () => clearInterval(timer)
  }, [authorized, connection, refreshLongestRunning])

  useEffect(() => {
    if (!authorized || threadId !== undefined) return
    refreshThreads()
    const timer = setInterval(refreshThreads, threadsEveryMs)
    return () => clearInterval(timer)
  }, [authorized, connection, threadId, refreshThreads])

  // ---- one thread ------------------------------------------------------------------------------
  const refreshThread = useCallback(() => {
    if (threadId === undefined) return
    Promise.all([getThread(threadId), getThreadEffects(threadId)]).then(
      ([d, e]) => {
        setDetail(d)
        setEffects(e)
        setMissing(false)
      },
      (error: unknown) => {
        if (error instanceof ApiError && error.status === 404) setMissing(true)
        else onError(error)
      }
    )
  }, [threadId, onError])

  useEffect(() => {
    setDetail(undefined)
    setEffects([])
    setMissing(false)
    if (!authorized || threadId === undefined) return
    refreshThread()
    const timer = setInterval(refreshThread, threadEveryMs)
    return () => clearInterval(timer)
  }, [authorized, connection, threadId, refreshThread])

  // ---- the event stream ------------------------------------------------------------------------
  const latest = useRef({ refreshThreads, refreshThread, refreshSummary, refreshLongestRunning, threadId })
  latest.current = { refreshThreads, refreshThread, refreshSummary, refreshLongestRunning, threadId }
  const pending = useRef<ReturnType<typeof setTimeout> | undefined>(undefined)
  const dirty = useRef({ threads: false, thread: false })
  const headKnown = summary !== undefined

  useEffect(() => {
    if (!authorized || !headKnown) return
    const stop = follow({
      // From the head the first reading saw: the page shows the present, not a replay of the log.
      after: summary?.head ?? 0,
      onState: (state) => {
        setStream(state)
        if (state === "unauthorized") onError(new Unauthorized(readToken()))
      },
      onEvent: (event) => {
        setRecent((previous) => [event, ...previous].slice(0, 12))
        dirty.current.threads = true
        if (event.aggregateId === latest.current.threadId) dirty.current.thread = true
        if (pending.current !== undefined) return
        pending.current = setTimeout(() => {
          pending.current = undefined
          const { refreshLongestRunning, refreshSummary, refreshThread, refreshThreads, threadId } = latest.current
          if (dirty.current.thread) refreshThread()
          if (dirty.current.threads && threadId === undefined) refreshThreads()
          if (dirty.current.threads) refreshLongestRunning()
          dirty.current = { threads: false, thread: false }
          refreshSummary()
        }, settleMs)
      }
    })
    return stop
    // The stream restarts when authorization changes, not on every summary reading.
  }, [authorized, connection, headKnown, onError])

  // ---- actions ---------------------------------------------------------------------------------
  const onStreamUnauthorized = useCallback(() => onError(new Unauthorized(readToken())), [onError])
  const onChanged = useCallback(() => {
    setNotice(undefined)
    refreshSummary()
    refreshThread()
    if (threadId === undefined) refreshThreads()
  }, [refreshSummary, refreshThread, refreshThreads, threadId])

  const onToken = (token: string) => {
    saveToken(token)
    setTokenRefused(false)
    setNeedToken(false)
    setConnection((n) => n + 1)
  }

  const openThread = (id: string) => {
    location.hash = `#/threads/${encodeURIComponent(id)}`
  }

  const chooseFilter = (next: ThreadFilter) => {
    setFilter(next)
    setCursors([undefined])
    setPage(undefined)
  }

  const stuckAfterMs = stuckSeconds * 1000
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
    <div class="app">
      <header class="top">
        <a class="brand" href="#/">
          Orchestration <span>dashboard</span>
        </a>
        <div class="top-right">
          <label class="setting" title="A running turn whose thread has had no event for this long is flagged stuck">
            stuck after
            <input
              type="number"
              min="1"
              step="1"
              value={stuckSeconds}
              data-testid="stuck-after"
              onInput={(e) => {
                const value = Number((e.target as HTMLInputElement).value)
                if (Number.isFinite(value) && value > 0) {
                  setStuckSeconds(value)
                  localStorage.setItem(stuckKey, String(value))
                }
              }}
            />
            s
          </label>
          <span class={`pill pill-${needToken ? "unauthorized" : stream}`} data-testid="stream-state">
            {needToken ? "token needed" : stream === "live" ? "● live" : stream}
          </span>
          {readToken() !== undefined ? (
            <button
              type="button"
              class="link"
              onClick={() => {
                clearToken()
                setNeedToken(true)
              }}
            >
              forget token
            </button>
          ) : null}
        </div>
      </header>

      {notice === undefined ? null : (
        <div class="notice" role="alert" data-testid="notice">
          {notice}
          <button type="button" class="link" onClick={() => setNotice(undefined)}>
            dismiss
          </button>
        </div>
      )}

      {components
        .filter((c) => c.status !== "ok")
        .map((c) => (
          <div class="notice" role="status" data-testid="component-degraded" data-component={c.name} key={c.name}>
            {c.name} is degraded: {c.message}
          </div>
        ))}

      {needToken ? <TokenPrompt refused={tokenRefused} onSubmit={onToken} /> : null}

      <main>
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
            onClick={() => {
              location.hash = "#/"
              chooseFilter("running")
            }}
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
          <Sparkline
            title="Reactor lag (due rows unsettled)"
            points={lagSeries(samples)}
            format={(v) => formatCount(Math.round(v))}
            unit=""
            color="#d97706"
            windowMs={chartWindowMs}
            testId="chart-lag"
          />
          <Sparkline
            title="Events committed"
            points={eventsRate}
            format={formatRate}
            unit=" /s"
            color="#2563eb"
            windowMs={chartWindowMs}
            testId="chart-events"
          />
          <Sparkline
            title="Effects settled"
            points={settledRate}
            format={formatRate}
            unit=" /s"
            color="#059669"
            windowMs={chartWindowMs}
            testId="chart-settled"
          />
        </section>

        {threadId === undefined ? (
          <div class="columns">
            <ThreadsPanel
              page={page}
              filter={filter}
              pageNumber={cursors.length}
              now={now}
              stuckAfterMs={stuckAfterMs}
              onFilter={chooseFilter}
              onOpen={openThread}
              onOlder={
                page?.next === null || page === undefined
                  ? undefined
                  : () => setCursors([...cursors, page.next ?? undefined])
              }
              onNewer={cursors.length <= 1 ? undefined : () => setCursors(cursors.slice(0, -1))}
            />
            <div class="side">
              <ApprovalsPanel
                approvals={approvals}
                now={now}
                onOpenThread={openThread}
                onChanged={onChanged}
                onError={onError}
              />
              <OutboxPanel summary={summary} onOpenThread={openThread} onChanged={onChanged} onError={onError} />
              <section class="panel" data-testid="live-events">
                <header class="panel-head">
                  <h2>Live events</h2>
                </header>
                {recent.length === 0 ? (
                  <p class="empty">waiting for events…</p>
                ) : (
                  <ul class="events">
                    {recent.map((event) => (
                      <li key={event.sequence}>
                        <span class="mono muted">#{event.sequence}</span> <span class="mono">{event.type}</span>{" "}
                        <a href={`#/threads/${encodeURIComponent(event.aggregateId)}`} class="mono">
                          {event.aggregateId}
                        </a>{" "}
                        <span class="muted small">{formatAgo(now - event.occurredAt)}</span>
                      </li>
                    ))}
                  </ul>
                )}
              </section>
            </div>
          </div>
        ) : (
          <div>
            <p>
              <a href="#/" data-testid="back">
                ← all threads
              </a>
            </p>
            <ThreadView
              threadId={threadId}
              detail={detail}
              effects={effects}
              missing={missing}
              now={now}
              onChanged={onChanged}
              onError={onError}
              onUnauthorized={onStreamUnauthorized}
            />
          </div>
        )}
      </main>
    </div>
  )
}
