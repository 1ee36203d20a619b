/**
 * The page's data as hooks, each read on its own timer while authorized (and again on a new
 * connection): the outbox summary and its samples, the thread list, one thread, and the event stream
 * that re-reads what an event touched shortly after a burst of events.
 */
import { useCallback, useEffect, useRef, useState } from "preact/hooks"
import {
  ApiError,
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
  Unauthorized
} from "./api.js"
import { stuckScan } from "./components/OverviewCards.js"
import type { ThreadFilter } from "./components/ThreadsPanel.js"
import { follow, type StreamEvent, type StreamState } from "./eventStream.js"
import { addSample, type Sample, windowMs } from "./samples.js"
import { readToken } from "./token.js"

const pageSize = 50
const summaryEveryMs = 2000
const threadsEveryMs = 5000
const threadEveryMs = 2000
/** Events arrive in bursts (a turn is several): re-read once the burst has passed. */
const settleMs = 250

type OnError = (error: unknown) => void

/** Runs `refresh` now and every `everyMs` while `enabled`; from the start again on a new connection. */
const usePolling = (enabled: boolean, refresh: () => void, everyMs: number, connection: number) =>
  useEffect(() => {
    if (!enabled) return
    refresh()
    const timer = setInterval(refresh, everyMs)
    return () => clearInterval(timer)
  }, [enabled, connection, refresh, everyMs])

/** The outbox summary, sampled, with the components banner and the approvals; and the server's clock. */
export const useSummary = (authorized: boolean, connection: number, onError: OnError) => {
  const [components, setComponents] = useState<ReadonlyArray<ComponentHealth>>([])
  const [summary, setSummary] = useState<OutboxSummary | undefined>(undefined)
  const [samples, setSamples] = useState<ReadonlyArray<Sample>>([])
  const offset = useRef(0)
  const [now, setNow] = useState(() => Date.now())
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

  usePolling(authorized, refreshSummary, summaryEveryMs, connection)

  // Ages tick every second, on the server's clock.
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now() + offset.current), 1000)
    return () => clearInterval(timer)
  }, [])

  return { components, summary, samples, approvals, now, refreshSummary }
}

/** The thread list, one page, and the longest-running threads. */
export const useThreadList = (
  authorized: boolean,
  connection: number,
  threadId: string | undefined,
  onError: OnError
) => {
  const [filter, setFilter] = useState<ThreadFilter>("all")
  const [cursors, setCursors] = useState<ReadonlyArray<number | undefined>>([undefined])
  const [page, setPage] = useState<ThreadPage | undefined>(undefined)
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
  usePolling(authorized, refreshLongestRunning, threadsEveryMs, connection)
  usePolling(authorized && threadId === undefined, refreshThreads, threadsEveryMs, connection)

  const chooseFilter = (next: ThreadFilter) => {
    setFilter(next)
    setCursors([undefined])
    setPage(undefined)
  }

  return { filter, chooseFilter, cursors, setCursors, page, longestRunning, refreshThreads, refreshLongestRunning }
}

/** One thread's view and effects; `missing` once the server answers 404. */
export const useThreadDetail = (
  authorized: boolean,
  connection: number,
  threadId: string | undefined,
  onError: OnError
) => {
  const [detail, setDetail] = useState<ThreadDetail | undefined>(undefined)
  const [effects, setEffects] = useState<ReadonlyArray<EffectRow>>([])
  const [missing, setMissing] = useState(false)
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

  return { detail, effects, missing, refreshThread }
}

/** What the event stream re-reads after a burst of events. */
export interface Refreshers {
  readonly refreshThreads: () => void
  readonly refreshThread: () => void
  readonly refreshSummary: () => void
  readonly refreshLongestRunning: () => void
  readonly threadId: string | undefined
}

/** The event stream from the head the first summary saw, and its newest events. */
export const useEventFollow = (
  authorized: boolean,
  connection: number,
  summary: OutboxSummary | undefined,
  onError: OnError,
  refreshers: Refreshers
) => {
  const [stream, setStream] = useState<StreamState>("connecting")
  const [recent, setRecent] = useState<ReadonlyArray<StreamEvent>>([])
  const latest = useRef(refreshers)
  latest.current = refreshers
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

  return { stream, recent }
}
