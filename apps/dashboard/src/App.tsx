/**
 * The dashboard: one page over the server's API. It samples /v1/outbox/summary every two seconds
 * (the charts keep a rolling window of those readings), reads one page of threads at a time, and
 * follows the event stream so a change shows without a reload: an event of a thread on screen
 * re-reads that thread's row or view shortly after. Any 401 brings up the token prompt.
 */
import { useCallback, useEffect, useState } from "preact/hooks"
import { Unauthorized } from "./api.js"
import { clearToken, readToken, saveToken } from "./token.js"
import { ApprovalsPanel } from "./components/ApprovalsPanel.js"
import { LiveEvents } from "./components/LiveEvents.js"
import { Notices } from "./components/Notices.js"
import { OutboxPanel } from "./components/OutboxPanel.js"
import { OverviewCards } from "./components/OverviewCards.js"
import { ThreadsPanel } from "./components/ThreadsPanel.js"
import { ThreadView } from "./components/ThreadView.js"
import { TokenPrompt } from "./components/TokenPrompt.js"
import { TopBar } from "./components/TopBar.js"
import { useEventFollow, useSummary, useThreadDetail, useThreadList } from "./pageData.js"

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
  const { components, summary, samples, approvals, now, refreshSummary } = useSummary(authorized, connection, onError)
  const { filter, chooseFilter, cursors, setCursors, page, longestRunning, refreshThreads, refreshLongestRunning } =
    useThreadList(authorized, connection, threadId, onError)
  const { detail, effects, missing, refreshThread } = useThreadDetail(authorized, connection, threadId, onError)
  const { stream, recent } = useEventFollow(authorized, connection, summary, onError, {
    refreshThreads,
    refreshThread,
    refreshSummary,
    refreshLongestRunning,
    threadId
  })

  // ---- actions ---------------------------------------------------------------------------------
  const onStreamUnauthorized = useCallback(() => onError(new Unauthorized(readToken())), [onError])
  const onChanged = useCallback(() => {
    setNotice(undefined)
    refreshSummary()
    refreshThread()
    if (threadId === undefined) refreshThreads()
  }, [refreshSummary, refreshThread, refreshThreads, threadId])
  /** What every panel with action buttons is handed: refresh after an action, report a refusal. */
  const actions = { onChanged, onError }

  const onToken = (token: string) => {
    saveToken(token)
    setTokenRefused(false)
    setNeedToken(false)
    setConnection((n) => n + 1)
  }

  const openThread = (id: string) => {
    location.hash = `#/threads/${encodeURIComponent(id)}`
  }

  const stuckAfterMs = stuckSeconds * 1000

  return (
    <div class="app">
      <TopBar
        stuckSeconds={stuckSeconds}
        onStuckSeconds={(value) => {
          setStuckSeconds(value)
          localStorage.setItem(stuckKey, String(value))
        }}
        needToken={needToken}
        stream={stream}
        onForgetToken={() => {
          clearToken()
          setNeedToken(true)
        }}
      />

      <Notices notice={notice} onDismiss={() => setNotice(undefined)} components={components} />

      {needToken ? <TokenPrompt refused={tokenRefused} onSubmit={onToken} /> : null}

      <main>
        <OverviewCards
          {...{ page, longestRunning, summary, samples, now, stuckAfterMs }}
          onShowStuck={() => {
            location.hash = "#/"
            chooseFilter("running")
          }}
        />

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
              <ApprovalsPanel approvals={approvals} now={now} onOpenThread={openThread} {...actions} />
              <OutboxPanel summary={summary} onOpenThread={openThread} {...actions} />
              <LiveEvents recent={recent} now={now} />
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
              {...actions}
              onUnauthorized={onStreamUnauthorized}
            />
          </div>
        )}
      </main>
    </div>
  )
}
