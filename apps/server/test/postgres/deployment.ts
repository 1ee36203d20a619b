/**
 * A scaled-out deployment for the PostgreSQL run: real server processes (the main job, agents domain)
 * on one fresh PostgreSQL schema and one world directory, each with its own NODE_ID, talked to over
 * real HTTP.
 */
import { TestStore } from "@orchestration/engine/testing"
import { Effect } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { agentsMain, serving, startProcess } from "../fixtures/process.js"

export const post = (url: string, body: unknown) =>
  Effect.promise(() =>
    fetch(`${url}/v1/commands`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body)
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }))
  )

export const get = (url: string, path: string) =>
  Effect.promise(() => fetch(`${url}${path}`).then((r) => r.json() as Promise<any>))

/** Polls a real process over HTTP (real time: the processes run on their own clocks). */
export const waitUntil = <A>(what: string, probe: Effect.Effect<A | undefined>, timeoutMs = 60_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + timeoutMs
    while (Date.now() < deadline) {
      const value = yield* probe
      if (value !== undefined) return value
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
    }
    return yield* Effect.dieMessage(`timed out waiting for ${what}`)
  })

export const deployment = () => {
  const dataDir = mkdtempSync(join(tmpdir(), "server-nodes-"))
  const schema = TestStore.freshSchema()
  const spawn = (nodeId: string) =>
    startProcess(
      {
        DATA_DIR: dataDir,
        DATABASE_URL: TestStore.testDatabaseUrl(),
        DATABASE_SCHEMA: schema,
        NODE_ID: nodeId,
        LOG_LEVEL: "info"
      },
      agentsMain
    )
  return {
    dataDir,
    spawn,
    /** A started process and its URL; killed when the test's scope ends. */
    node: (nodeId: string) =>
      Effect.gen(function* () {
        const server = yield* spawn(nodeId)
        return { server, url: yield* serving(server, 30_000) }
      })
  }
}
