/**
 * The one module that relies on how @effect/sql 0.52 builds a statement, beyond its typed API. Our
 * SqliteClient runs a plain statement straight on the driver (one Effect step inside a transaction, a
 * permit and one step outside, instead of ≈ 60); to do that it replaces the statement's `commit`, the method Effect calls when a statement
 * is yielded. What it assumes, each checked by test/effect-sql-internals.test.ts, which fails loudly
 * when an upgrade changes one of them:
 *
 * - Every plain statement a client builds (`sql\`…\``, `sql.unsafe`) shares one prototype whose
 *   `commit` runs it, and an own `commit` on the instance is what `yield*` then runs.
 * - `statement.compile()` gives the final `[sql, params]` the connection would have received.
 * - `Statement.currentTransformer` holds `Some` exactly when a statement transformer must see the
 *   statement (then the statement takes @effect/sql's own path, which applies it).
 * - `TransactionConnection` holds `[connection, depth]` while a transaction runs on that connection.
 * - A client is a function (the template tag) carrying its methods as own properties, so a wrapper
 *   that copies them and replaces the tag and `unsafe` keeps every other method (`reserve`,
 *   `withTransaction`, `insert`, `onDialectOrElse`, …).
 */
import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import { Context, Effect } from "effect"

type Rows = ReadonlyArray<any>

/** Runs one compiled statement on the connection, synchronously, as one Effect step. */
export type DirectRun = (sql: string, params: ReadonlyArray<unknown>, mode: "rows") => Effect.Effect<Rows, SqlError>

type Commit = (this: Statement.Statement<unknown>) => Effect.Effect<ReadonlyArray<unknown>, SqlError>

/** The prototype every plain statement of `client` shares; its `commit` is @effect/sql's own path. */
export const statementPrototype = (client: Client.SqlClient): { readonly commit: Commit } =>
  Object.getPrototypeOf(client.unsafe("SELECT 1")) as { readonly commit: Commit }

/**
 * `client`, except that a plain statement goes to the driver in one step: inside a transaction on
 * `connection`, to `run` (compiled, no span, no permit: the transaction already holds it); outside any
 * transaction, to `runOutside`, which must hold the connection's permit while the statement runs.
 * Inside a transaction on another connection, or under a statement transformer, the statement takes
 * @effect/sql's path unchanged.
 */
export const withDirectStatements = (
  client: Client.SqlClient,
  connection: Connection,
  run: DirectRun,
  runOutside: DirectRun
): Client.SqlClient => {
  const primitive = statementPrototype(client)
  const genericCommit = primitive.commit
  function directCommit(this: Statement.Statement<unknown>) {
    return Effect.withFiberRuntime<ReadonlyArray<unknown>, SqlError>((fiber) => {
      if (fiber.getFiberRef(Statement.currentTransformer)._tag === "Some") return genericCommit.call(this)
      const transaction = Context.getOption(fiber.currentContext, Client.TransactionConnection)
      if (transaction._tag === "Some" && transaction.value[0] !== connection) return genericCommit.call(this)
      const [sql, params] = this.compile()
      return transaction._tag === "None" ? runOutside(sql, params, "rows") : run(sql, params, "rows")
    })
  }
  const direct = <S>(statement: S): S => {
    if (Object.getPrototypeOf(statement) === primitive) (statement as { commit: unknown }).commit = directCommit
    return statement
  }
  const wrapped = Object.assign(
    function sql(this: unknown, ...args: Array<unknown>) {
      return direct((client as unknown as (...args: Array<unknown>) => unknown)(...args))
    },
    client,
    { unsafe: (sql: string, params?: ReadonlyArray<unknown>) => direct(client.unsafe(sql, params)) }
  ) as unknown as Client.SqlClient
  ;(wrapped as { safe: unknown }).safe = wrapped
  return wrapped
}
