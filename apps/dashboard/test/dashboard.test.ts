/**
 * The dashboard in a real browser (Debian's Chromium through playwright-core) against a real server
 * process with the agents domain and the scripted model. Every wait is bounded; nothing sleeps.
 */
import type { Browser, Page } from "playwright-core"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { launchBrowser, openPage, screenshot } from "./fixtures/browser.js"
import { type RunningServer, startServer } from "./fixtures/server.js"

/** How long any one thing may take to show on the page. */
const timeout = 20_000

const script = (...steps: ReadonlyArray<unknown>) => JSON.stringify({ script: steps })
/** A turn held running: its execute sleeps for ten minutes unless cancelled. */
const heldTurn = script({ toolCalls: [{ name: "execute", arguments: { command: "sleep 600" } }] }, { text: "built" })
const quickTurn = script(
  { toolCalls: [{ name: "publish", arguments: { path: "notes.md", content: "hello" } }] },
  { text: "published" }
)
const deployTurn = script(
  { toolCalls: [{ name: "github__create_release", arguments: { tag: "v1.4.0" } }] },
  { text: "released" }
)

const row = (threadId: string) => `[data-testid="thread-row"][data-thread-id="${threadId}"]`

const send = async (server: RunningServer, threadId: string, text: string, title?: string) => {
  if (title !== undefined) {
    const created = await server.command({ commandId: `create-${threadId}`, type: "thread.create", threadId, title })
    assert.strictEqual(created.status, 200, JSON.stringify(created.body))
  }
  const sent = await server.command({
    commandId: `send-${threadId}`,
    type: "message.send",
    threadId,
    messageId: "m1",
    text
  })
  assert.strictEqual(sent.status, 200, JSON.stringify(sent.body))
}

/** Marks the document; `stillSameDocument` proves later changes came without a reload. */
const markDocument = (page: Page) => page.evaluate(() => ((window as unknown as { __mark: number }).__mark = 42))
const stillSameDocument = async (page: Page) =>
  assert.strictEqual(await page.evaluate(() => (window as unknown as { __mark?: number }).__mark), 42)

describe("the dashboard against a real server", () => {
  let server: RunningServer
  let browser: Browser
  let page: Page
  const errors: Array<string> = []

  beforeAll(async () => {
    ;[server, browser] = await Promise.all([startServer(), launchBrowser()])
    page = await openPage(browser, errors)
  })

  afterAll(async () => {
    await browser?.close()
    await server?.stop()
  })

  it("loads, shows a running turn live and flags it stuck; cancelling its effect completes the turn without a reload", async () => {
    await page.goto(server.url)
    await page.waitForSelector('[data-testid="stream-state"]:has-text("live")', { timeout })
    await page.waitForSelector('[data-testid="threads"] >> text=no threads', { timeout })
    await markDocument(page)

    await send(server, "build-42", heldTurn, "Release build")
    await page.waitForSelector(`${row("build-42")}[data-turn-status="running"]`, { timeout })
    // No event comes while the execute sleeps: with a 1 s limit the turn is flagged.
    await page.fill('[data-testid="stuck-after"]', "1")
    await page.waitForSelector(`${row("build-42")} [data-testid="stuck"]`, { timeout })
    await page.waitForSelector('[data-testid="stuck-total"]:text-is("1")', { timeout })
    await screenshot(page, "1-running-turn-stuck")

    await page.click(`${row("build-42")} a`)
    const effect = '[data-testid="effect"][data-effect-id="tool:build-42:m1:call_1_0"]'
    await page.waitForSelector(`${effect}[data-status="running"]`, { timeout })
    assert.include(await page.textContent(effect), "lease dash-node")
    await screenshot(page, "2-thread-view-running")

    page.once("dialog", (dialog) => void dialog.accept())
    await page.click(`${effect} [data-testid="cancel"]`)
    await page.waitForSelector(`${effect}[data-status="cancelled"]`, { timeout })
    await page.waitForSelector('[data-testid="turn"] [data-testid="turn-status"]:has-text("completed")', { timeout })
    await page.click('[data-testid="back"]')
    await page.waitForSelector(`${row("build-42")}[data-turn-status="completed"]`, { timeout })
    assert.strictEqual(await page.$(`${row("build-42")} [data-testid="stuck"]`), null)
    await page.waitForSelector('[data-testid="stuck-total"]:text-is("0")', { timeout })
    await stillSameDocument(page)
    await screenshot(page, "3-turn-completed")
    assert.deepStrictEqual(errors, [])
  })

  it("shows a failed effect with its reason; a Retry of a process-bound call whose turn closed is refused with the reason, on the page and in the API", async () => {
    await page.fill('[data-testid="stuck-after"]', "5")
    await send(server, "notes-1", quickTurn, "Write the notes")
    await send(server, "notes-2", "hello there", "Say hello")
    await send(server, "review-7", heldTurn, "Nightly review")
    // No MCP server 'github' is configured: the call fails at once (a process-bound call is never retried blindly).
    await send(server, "deploy-3", deployTurn, "Deploy to production")

    const failure = '[data-testid="failure"][data-effect-id="tool:deploy-3:m1:call_1_0"]'
    await page.waitForSelector(failure, { timeout })
    assert.include(
      await page.textContent(`${failure} [data-testid="failure-reason"]`),
      "no MCP server named 'github' is configured"
    )
    assert.include(await page.textContent(failure), "attempts 1")
    await page.waitForSelector(`${row("deploy-3")}[data-turn-status="completed"]`, { timeout })
    await page.waitForSelector(`${row("review-7")} [data-testid="stuck"]`, { timeout })
    await screenshot(page, "4-failed-effect")

    // The call already has its result and its turn has closed: running it again would call the
    // server a second time for nobody to hear, so the retry is refused (409) and nothing changes.
    await page.click(`${failure} [data-testid="retry"]`)
    await page.waitForSelector('[data-testid="notice"]:has-text("retry refused")', { timeout })
    assert.include(await page.textContent('[data-testid="notice"]'), "has closed")
    await page.waitForSelector(failure, { timeout })
    await page.click(`${row("deploy-3")} a`)
    await page.waitForSelector(
      '[data-testid="effect-row"][data-effect-id="tool:deploy-3:m1:call_1_0"][data-status="failed"]',
      { timeout }
    )
    const api = await server.get("/v1/effects/tool:deploy-3:m1:call_1_0")
    assert.strictEqual(api.body.status, "failed")
    assert.strictEqual(api.body.attempts, 1)
    await screenshot(page, "5-retry-refused")
    await page.click('[data-testid="back"]')
    await page.waitForSelector(row("deploy-3"), { timeout })
    await stillSameDocument(page)
    assert.deepStrictEqual(errors, [])
  })

  it("the thread view shows the answer growing as it streams, and an interrupted answer's partial text marked", async () => {
    const words = Array.from({ length: 12 }, (_, i) => `word${i} `)
    await send(server, "stream-1", script({ chunks: words, chunkDelayMs: 250 }), "Streams its answer")
    await page.goto(`${server.url}/#/threads/stream-1`)
    await markDocument(page)
    const live = '[data-testid="live-text"][data-status="streaming"]'
    await page.waitForSelector(`${live}:has-text("word1 ")`, { timeout })
    // Partial: the answer is still growing on the page, and the transcript does not hold it yet.
    const partial = (await page.textContent(`${live} .text`)) ?? ""
    assert.isTrue(words.join("").startsWith(partial) && partial.length < words.join("").length, partial)
    await screenshot(page, "8-answer-streaming")
    await page.waitForSelector('[data-testid="turn"] [data-testid="turn-status"]:has-text("completed")', { timeout })
    await page.waitForSelector(live, { state: "detached", timeout })
    await page.waitForSelector(`[data-testid="transcript"] >> text=${words.join("").trim()}`, { timeout })

    await send(server, "stream-2", script({ chunks: words, chunkDelayMs: 400 }), "Interrupted while streaming")
    await page.goto(`${server.url}/#/threads/stream-2`)
    await page.waitForSelector(`${live}:has-text("word1 ")`, { timeout })
    const stopped = await server.command({
      commandId: "stop-stream-2",
      type: "turn.interrupt",
      threadId: "stream-2",
      turnId: "stream-2:m1"
    })
    assert.strictEqual(stopped.status, 200, JSON.stringify(stopped.body))
    const marked = '[data-testid="live-text"][data-status="interrupted"]'
    await page.waitForSelector(marked, { timeout })
    assert.include(await page.textContent(`${marked} [data-testid="live-status"]`), "interrupted")
    assert.include(await page.textContent(`${marked} .text`), "word0 word1 ")
    await screenshot(page, "9-answer-interrupted")
    await stillSameDocument(page)
    await page.click('[data-testid="back"]')
    await page.waitForSelector(row("stream-2"), { timeout })
    assert.deepStrictEqual(errors, [])
  })

  it("reads threads one page of 50 at a time and pages on with Older", async () => {
    for (let i = 0; i < 55; i++) {
      const created = await server.command({
        commandId: `bulk-${i}`,
        type: "thread.create",
        threadId: `bulk-${String(i).padStart(2, "0")}`
      })
      assert.strictEqual(created.status, 200)
    }
    const total = (await server.get("/v1/threads?limit=1")).body.counts as Record<string, number>
    const count = Object.values(total).reduce((a, b) => a + b, 0)
    await page.waitForSelector(row("bulk-54"), { timeout })
    assert.strictEqual((await page.$$('[data-testid="thread-row"]')).length, 50)
    assert.strictEqual(await page.textContent('[data-testid="threads-total"]'), String(count))
    await page.click('[data-testid="older"]')
    await page.waitForSelector(row("build-42"), { timeout })
    assert.strictEqual((await page.$$('[data-testid="thread-row"]')).length, count - 50)
    await page.click('[data-testid="filter-running"]')
    await page.waitForSelector(row("review-7"), { timeout })
    assert.strictEqual((await page.$$('[data-testid="thread-row"]')).length, 1)
    await page.click('[data-testid="filter-all"]')
    await page.waitForSelector(row("bulk-54"), { timeout })
    assert.deepStrictEqual(errors, [])
  })
})

describe("the dashboard with API_TOKEN set", () => {
  const token = "dashboard-secret-token"
  let server: RunningServer
  let browser: Browser
  const errors: Array<string> = []

  beforeAll(async () => {
    ;[server, browser] = await Promise.all([startServer({ token }), launchBrowser()])
  })

  afterAll(async () => {
    await browser?.close()
    await server?.stop()
  })

  it("asks for the token, refuses a wrong one, then reads and follows the API with it", async () => {
    const page = await openPage(browser, errors)
    await page.goto(server.url)
    await page.waitForSelector('[data-testid="token-prompt"]', { timeout })
    await screenshot(page, "6-token-prompt")
    await page.fill('[data-testid="token-input"]', "not-the-token")
    await page.click('[data-testid="token-submit"]')
    await page.waitForSelector('[data-testid="token-refused"]', { timeout })

    await page.fill('[data-testid="token-input"]', token)
    await page.click('[data-testid="token-submit"]')
    await page.waitForSelector('[data-testid="token-prompt"]', { state: "detached", timeout })
    await page.waitForSelector('[data-testid="stream-state"]:has-text("live")', { timeout })
    await send(server, "secure-1", quickTurn, "Behind the token")
    await page.waitForSelector(`${row("secure-1")}[data-turn-status="completed"]`, { timeout })
    assert.strictEqual(await page.evaluate(() => sessionStorage.getItem("orchestration.apiToken")), token)
    await screenshot(page, "7-with-token")
    assert.deepStrictEqual(errors, [])
  })
})
