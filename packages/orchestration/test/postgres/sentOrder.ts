/**
 * The order in which node-postgres clients were sent statements and answered them: what pipelining
 * (PostgresStore's pool) changes, seen from outside. Statements are named by their first 24 characters.
 */
import { Effect } from "effect"
import pg from "pg"

/** The order in which node-postgres was sent statements and answered them while `body` ran. */
export const orderDuring = <A, E, R>(body: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const order: Array<string> = []
      const original = pg.Client.prototype.query
      pg.Client.prototype.query = function (this: pg.Client, config: unknown, ...rest: Array<unknown>) {
        const text = (typeof config === "string" ? config : ((config as { text?: string }).text ?? ""))
          .replace(/\s+/g, " ")
          .trim()
          .slice(0, 24)
        order.push(`sent ${text}`)
        const args = rest.map((arg) =>
          typeof arg === "function"
            ? (...answer: Array<unknown>) => {
                order.push(`answered ${text}`)
                return (arg as (...a: Array<unknown>) => unknown)(...answer)
              }
            : arg
        )
        return (original as (...args: Array<unknown>) => unknown).call(this, config, ...args)
      } as typeof original
      return { order, original }
    }),
    ({ order }) => Effect.map(Effect.exit(body), (exit) => ({ exit, order })),
    ({ original }) =>
      Effect.sync(() => {
        pg.Client.prototype.query = original
      })
  )
