/**
 * Approvals in a real browser against a real server process with APPROVAL=required: the waiting
 * call is listed with its arguments, shown as awaiting approval in its thread, and clicking Approve
 * lets it run and the turn complete, without a reload; Deny (with a reason) completes the other turn
 * with the call never performed.
 */
import type { Browser, Page } from "playwright-core"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { launchBrowser, openPage, screenshot } from "./fixtures/browser.js"
import { type RunningServer, startServer } from "./fixtures/server.js"

const timeout = 20_000
const token = "dashboard-approval-token"
const script = (...steps: ReadonlyArray<unknown>) => JSON.stringify({ script: steps })

const send = async (server: RunningServer, threadId: string, command: string) => {
  const sent = await server.command({
    commandId: `send-${threadId}`,
    type: "message.send",
    threadId,
    messageId: "m1",
    text: script({ toolCalls: [{ name: "execute", arguments: { command } }] }, { text: "done" })
  })
  assert.strictEqual(sent.status, 200, JSON.stringify(sent.body))
}

const approval = (threadId: string) => `[data-testid="approval"][data-thread-id="${threadId}"]`

describe("approvals on the dashboard", () => {
  let server: RunningServer
  let browser: Browser
  let page: Page
  const errors: Array<string> = []

  beforeAll(async () => {
    ;[server, browser] = await Promise.all([startServer({ token, env: { APPROVAL: "required" } }), launchBrowser()])
    page = await openPage(browser, errors)
  })

  afterAll(async () => {
    await browser?.close()
    await server?.stop()
  })

  it("shows the waiting execute with its arguments; Approve runs it and the turn completes; Deny answers the model", async () => {
    await page.goto(server.url)
    await page.fill('[data-testid="token-input"]', token)
    await page.click('[data-testid="token-submit"]')
    await page.waitForSelector('[data-testid="approvals"] >> text=no calls await approval', { timeout })

    await send(server, "ship-1", "echo shipped-from-dashboard")
    await page.waitForSelector(approval("ship-1"), { timeout })
    const args = await page.textContent(`${approval("ship-1")} [data-testid="approval-arguments"]`)
    assert.include(args, '"command": "echo shipped-from-dashboard"')
    assert.include(await page.textContent(approval("ship-1")), "execute")
    await screenshot(page, "approval-1-pending")

    // The thread shows the call awaiting approval, with no effect row.
    await page.click(`${approval("ship-1")} a`)
    await page.waitForSelector('[data-testid="turn-status"]:has-text("awaiting-approval")', { timeout })
    await page.waitForSelector('[data-testid="tool-call"] [data-testid="effect"][data-status="awaiting-approval"]', {
      timeout
    })
    await screenshot(page, "approval-2-thread-awaiting")
    await page.click('[data-testid="tool-call"] [data-testid="approve"]')
    await page.waitForSelector('[data-testid="turn-status"]:has-text("completed")', { timeout })
    await page.waitForSelector(
      '[data-testid="effect"][data-effect-id="tool:ship-1:m1:call_1_0"][data-status="succeeded"]',
      {
        timeout
      }
    )
    assert.include(await page.textContent('[data-testid="transcript"]'), "shipped-from-dashboard")
    await screenshot(page, "approval-3-approved-completed")

    // Deny from the overview, with a reason the model reads.
    await page.click('[data-testid="back"]')
    await send(server, "risky-2", "rm -rf /workspace/*")
    await page.waitForSelector(approval("risky-2"), { timeout })
    page.once("dialog", (dialog) => void dialog.accept("not today"))
    await page.click(`${approval("risky-2")} [data-testid="deny"]`)
    await page.waitForSelector(approval("risky-2"), { state: "detached", timeout })
    const thread = await server.get("/v1/threads/risky-2")
    assert.strictEqual(thread.body.turns[0].status, "completed")
    assert.deepStrictEqual(
      [thread.body.turns[0].toolCalls[0].status, thread.body.turns[0].toolCalls[0].result],
      ["denied", "denied by the operator: not today; the call was not performed"]
    )
    await page.waitForSelector('[data-testid="approvals"] >> text=no calls await approval', { timeout })
    assert.deepStrictEqual(errors, [])
  })
})
