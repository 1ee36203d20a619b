/**
 * A page of another origin, in a real browser, against a default server (loopback, no token): the
 * requests a hostile page can make without CORS (`fetch(…, {mode: "no-cors"})`, a text/plain body,
 * a JSON request whose preflight is not answered) must not change anything.
 */
import type { Browser } from "playwright-core"
import { createServer, type Server } from "node:http"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { launchBrowser, openPage } from "./fixtures/browser.js"
import { type RunningServer, startServer } from "./fixtures/server.js"

const heldTurn = JSON.stringify({
  script: [{ toolCalls: [{ name: "execute", arguments: { command: "sleep 600" } }] }, { text: "built" }]
})
const effectId = "tool:held-1:m1:call_1_0"

/** Serves one empty page on its own port: the other origin. */
const startOtherOrigin = () =>
  new Promise<{ readonly url: string; readonly server: Server }>((resolve) => {
    const server = createServer((_, response) =>
      response.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>elsewhere</title>")
    )
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      resolve({ url: `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`, server })
    })
  })

const waitForStatus = async (server: RunningServer, status: string) => {
  const deadline = Date.now() + 30_000
  while (Date.now() < deadline) {
    const effect = await server.get(`/v1/effects/${effectId}`)
    if (effect.status === 200 && effect.body.status === status) return effect.body
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`effect ${effectId} never became ${status}`)
}

describe("a page on another origin cannot drive a default server", () => {
  let server: RunningServer
  let browser: Browser
  let other: { readonly url: string; readonly server: Server }

  beforeAll(async () => {
    ;[server, browser, other] = await Promise.all([startServer(), launchBrowser(), startOtherOrigin()])
  })

  afterAll(async () => {
    await browser?.close()
    await server?.stop()
    other?.server.close()
  })

  it("no-cors and text/plain POSTs to cancel and retry, and a JSON POST without CORS, leave a running effect running", async () => {
    const sent = await server.command({
      commandId: "send-held-1",
      type: "message.send",
      threadId: "held-1",
      messageId: "m1",
      text: heldTurn
    })
    assert.strictEqual(sent.status, 200, JSON.stringify(sent.body))
    const before = await waitForStatus(server, "running")

    const page = await openPage(browser, [])
    await page.goto(other.url)
    const outcomes = await page.evaluate(
      async ({ target, effectId }) => {
        const base = `${target}/v1/effects/${encodeURIComponent(effectId)}`
        const attempts: Array<[string, RequestInit]> = [
          ["cancel", { method: "POST", mode: "no-cors" }],
          ["cancel", { method: "POST", mode: "no-cors", headers: { "content-type": "text/plain" }, body: "{}" }],
          ["retry", { method: "POST", mode: "no-cors" }],
          ["cancel", { method: "POST", mode: "cors", headers: { "content-type": "application/json" }, body: "{}" }]
        ]
        const results: Array<string> = []
        for (const [action, init] of attempts) {
          results.push(
            await fetch(`${base}/${action}`, init).then(
              (r) => `${action} ${r.type}`,
              (e: unknown) => `${action} refused: ${String(e)}`
            )
          )
        }
        return results
      },
      { target: server.url, effectId }
    )
    assert.strictEqual(outcomes.length, 4)

    const after = await server.get(`/v1/effects/${effectId}`)
    assert.strictEqual(after.body.status, "running", JSON.stringify(outcomes))
    assert.strictEqual(after.body.attempts, before.attempts)
    assert.strictEqual(
      (await server.get(`/v1/commands/${encodeURIComponent(`operator:cancel:${effectId}#${before.attempts}`)}`)).status,
      404
    )

    // The dashboard's own way (same origin, JSON) still works: the effect is cancelled.
    const own = await fetch(`${server.url}/v1/effects/${encodeURIComponent(effectId)}/cancel`, {
      method: "POST",
      headers: { "content-type": "application/json" }
    })
    assert.strictEqual(own.status, 200)
    await waitForStatus(server, "cancelled")
  })
})
