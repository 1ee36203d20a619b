// Regenerates docs/dashboard.png (the README's picture): starts the built server on a scratch data
// directory, drives about a minute of scripted agent traffic (one turn held running, one failing MCP
// call), and photographs the page in Chromium. A demo generator, not a test: it paces itself with
// sleeps on purpose. Run after `pnpm build` at the root: `node apps/dashboard/scripts/screenshot.mjs`.
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { chromium } from "playwright-core"

const at = (relative) => fileURLToPath(new URL(relative, import.meta.url))
const output = process.argv[2] ?? at("../../../docs/dashboard.png")
const dataDir = mkdtempSync(join(tmpdir(), "dashboard-shot-"))
const server = spawn(process.execPath, [at("../../server/dist/src/main.js")], {
  env: {
    PATH: process.env.PATH,
    PORT: "0",
    DATA_DIR: dataDir,
    NODE_ID: "node-a",
    DASHBOARD_DIR: at("../dist"),
    SHUTDOWN_GRACE_MS: "300"
  },
  stdio: ["ignore", "pipe", "inherit"]
})
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const url = await new Promise((resolve, reject) => {
  let text = ""
  server.stdout.setEncoding("utf8").on("data", (chunk) => {
    text += chunk
    const line = text.split("\n").find((l) => l.includes('"message":"serving '))
    if (line !== undefined) resolve(JSON.parse(line).annotations.url)
  })
  server.on("exit", () => reject(new Error("the server exited before serving")))
})

const post = (body) =>
  fetch(`${url}/v1/commands`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body)
  }).then((r) => r.json())
const script = (...steps) => JSON.stringify({ script: steps })
const start = async (threadId, title, text) => {
  await post({ commandId: `create-${threadId}`, type: "thread.create", threadId, title })
  await post({ commandId: `send-${threadId}`, type: "message.send", threadId, messageId: "m1", text })
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu"]
})
try {
  const page = await (await browser.newContext({ viewport: { width: 1440, height: 960 } })).newPage()
  await page.goto(url)
  const titles = [
    "Summarise the incident",
    "Refactor the billing module",
    "Triage new issues",
    "Write release notes",
    "Review PR #482",
    "Update dependencies",
    "Draft the weekly report",
    "Plan the migration"
  ]
  let n = 0
  for (let round = 0; round < 24; round++) {
    for (let i = 0; i < 2 + (round % 5); i++) {
      n++
      const id = `agent-${String(n).padStart(3, "0")}`
      await start(
        id,
        titles[n % titles.length],
        script(
          {
            toolCalls: [
              { name: "publish", arguments: { path: `out/${id}.md`, content: `v${n}` } },
              { name: "execute", arguments: { command: "npm test", sleepMs: 500 + (n % 7) * 400 } }
            ]
          },
          { toolCalls: [{ name: "trigger_edit", arguments: { triggerId: `t-${id}`, spec: { every: "1h" } } }] },
          { text: "done" }
        )
      )
    }
    if (round === 16) {
      // No MCP server 'github' is configured: this call fails with a reason.
      await start(
        "deploy-3",
        "Deploy to production",
        script({ toolCalls: [{ name: "github__create_release", arguments: { tag: "v1.4.0" } }] }, { text: "released" })
      )
    }
    if (round === 18)
      await start(
        "nightly-review",
        "Nightly review",
        script({ toolCalls: [{ name: "execute", arguments: { command: "make audit", sleepMs: 600_000 } }] })
      )
    if (round === 20) await page.fill('[data-testid="stuck-after"]', "5")
    if (round < 23) await sleep(2500)
  }
  await sleep(1200)
  await page.screenshot({ path: output })
  console.log(`wrote ${output}`)
} finally {
  await browser.close()
  server.kill("SIGTERM")
  await new Promise((resolve) => server.on("exit", resolve))
  rmSync(dataDir, { recursive: true, force: true })
}
