/**
 * The store under the conformance suite. `TEST_STORE=postgres` runs the same tests on PostgreSQL:
 * the run gets a fresh database (created by `globalSetup`, dropped at the end), and each store a
 * test opens is a schema in it, so tests stay isolated. A test that reopens "the same file" (a
 * restart) gets the same schema back, exactly as it gets the same SQLite file back.
 * `TEST_STORE=sqlite-node` runs them on SQLite through @effect/sql-sqlite-node's stock SqlClient, the
 * way an application that already has that layer hands it to the engine (`SqliteStore.layerOver`).
 */
import { createHash, randomUUID } from "node:crypto"
import type { SqlClient } from "@effect/sql/SqlClient"
import { SqliteClient as SqliteNode } from "@effect/sql-sqlite-node"
import { Layer } from "effect"
import type { StorageFailure, StoreLocked } from "../Errors.js"
import pg from "pg"
import * as PostgresStore from "../storage/PostgresStore.js"
import * as SqliteStore from "../storage/SqliteStore.js"

export type TestStoreKind = "sqlite" | "sqlite-node" | "postgres"

export const testStoreKind = (): TestStoreKind => {
  const kind = process.env.TEST_STORE
  return kind === "postgres" || kind === "sqlite-node" ? kind : "sqlite"
}

/** Where the run's PostgreSQL server is (trust auth on this machine and in CI). */
export const adminUrl = () => process.env.TEST_POSTGRES_ADMIN_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

const schemaFor = (filename: string) =>
  filename === ":memory:"
    ? `t_${randomUUID().replace(/-/g, "").slice(0, 20)}`
    : `f_${createHash("sha256").update(filename).digest("hex").slice(0, 20)}`

/** The test database URL set by globalSetup. */
export const testDatabaseUrl = () => {
  const url = process.env.TEST_DATABASE_URL
  if (url === undefined)
    throw new Error(
      "TEST_STORE=postgres needs TEST_DATABASE_URL (set by the vitest globalSetup of @orchestration/engine/testing)"
    )
  return url
}

/** A store for a test: the SQLite file (or memory), or its PostgreSQL schema in the run's database. */
export const layer = (
  options: { readonly filename?: string } = {}
): Layer.Layer<SqlClient, StorageFailure | StoreLocked> => {
  const filename = options.filename ?? ":memory:"
  switch (testStoreKind()) {
    case "postgres":
      return PostgresStore.layer({ url: testDatabaseUrl(), schema: schemaFor(filename), maxConnections: 4 })
    case "sqlite-node":
      // orDie: `SqliteNode.layer` declares ConfigError only for its Config-reading sibling; it reads none.
      return SqliteStore.layerOver({ filename }, Layer.orDie(SqliteNode.layer({ filename })))
    case "sqlite":
      return SqliteStore.layer({ filename })
  }
}

/** A fresh, empty schema of the run's database, for tests that start server processes on PostgreSQL. */
export const freshSchema = () => schemaFor(":memory:")

const withAdmin = async <A>(f: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: adminUrl() })
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
  }
}

/** Creates a database for this run and returns its URL. */
export const createRunDatabase = async (prefix = "orch_test") => {
  const name = `${prefix}_${process.pid}_${Date.now().toString(36)}`
  await withAdmin((client) => client.query(`CREATE DATABASE ${name}`))
  const url = new URL(adminUrl())
  url.pathname = `/${name}`
  return { name, url: url.toString() }
}

/** Drops the run's database, disconnecting whatever is still connected. */
export const dropRunDatabase = (name: string) =>
  withAdmin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined)

/**
 * vitest globalSetup: with TEST_STORE=postgres, create the run's database before the workers start
 * and drop it after. Use as `globalSetup: ["@orchestration/engine/testing/global-setup"]`-style
 * wrapper (see each package's vitest config).
 */
export const globalSetup = async () => {
  if (testStoreKind() !== "postgres") return () => undefined
  const db = await createRunDatabase()
  process.env.TEST_DATABASE_URL = db.url
  return async () => {
    await dropRunDatabase(db.name)
  }
}
