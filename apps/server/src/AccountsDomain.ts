/**
 * The domain the server runs until the agents domain is plugged in: the engine's example accounts
 * (see packages/orchestration/examples/Accounts.ts) plus a reactor that "sends" the welcome email by
 * appending a line to `<DATA_DIR>/mail.log`, so a test can count how often it really happened.
 * A few owners steer the effect, for operator and shutdown tests: `bounce@…` fails for good,
 * `later@…` is due in an hour (pending, cancellable).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Aggregate, Decision, EffectFailure, Projection, Reactor } from "@orchestration/engine"
import { Context, Duration, Effect, Layer, Schema } from "effect"
import { appendFile, mkdir } from "node:fs/promises"
import { join } from "node:path"
import * as ServerDomain from "./ServerDomain.js"

const Opened = Aggregate.event("account.opened", { owner: Schema.String, at: Schema.Number })
const Deposited = Aggregate.event("account.deposited", { amount: Schema.Number })
const Withdrawn = Aggregate.event("account.withdrawn", { amount: Schema.Number })
const AccountEvent = Schema.Union(Opened, Deposited, Withdrawn)
type AccountEvent = typeof AccountEvent.Type

interface AccountState {
  readonly open: boolean
  readonly balance: number
}

export const Account = Aggregate.make({
  name: "account",
  commands: {
    "account.open": Aggregate.command("account.open", { accountId: Schema.String, owner: Schema.String }),
    "account.deposit": Aggregate.command("account.deposit", { accountId: Schema.String, amount: Schema.Number }),
    "account.withdraw": Aggregate.command("account.withdraw", { accountId: Schema.String, amount: Schema.Number }),
    /** Accepted, decides nothing. */
    "account.touch": Aggregate.command("account.touch", { accountId: Schema.String }),
    /** A decider bug, so the 500 path can be exercised. */
    "account.explode": Aggregate.command("account.explode", { accountId: Schema.String })
  },
  events: AccountEvent,
  aggregateId: (command) => command.accountId,
  initialState: { open: false, balance: 0 } as AccountState,
  evolve: (state: AccountState, event: AccountEvent): AccountState => {
    switch (event.type) {
      case "account.opened":
        return { ...state, open: true }
      case "account.deposited":
        return { ...state, balance: state.balance + event.amount }
      case "account.withdrawn":
        return { ...state, balance: state.balance - event.amount }
    }
  },
  decide: (state, command, ctx) => {
    switch (command.type) {
      case "account.open":
        if (state.open) return Decision.reject("already-open", `account ${ctx.aggregateId} exists`)
        return Decision.of<AccountEvent>({
          events: [{ type: "account.opened", owner: command.owner, at: ctx.now }],
          effects: [
            {
              kind: "email.send",
              key: "welcome",
              payload: { to: command.owner, template: "welcome" },
              ...(command.owner.startsWith("later@") ? { availableAt: ctx.now + 3_600_000 } : {})
            }
          ]
        })
      case "account.deposit":
        if (!state.open) return Decision.reject("not-open", `account ${ctx.aggregateId} is not open`)
        return Decision.of<AccountEvent>({ events: [{ type: "account.deposited", amount: command.amount }] })
      case "account.withdraw":
        if (!state.open) return Decision.reject("not-open", `account ${ctx.aggregateId} is not open`)
        if (command.amount > state.balance) return Decision.reject("insufficient-funds", "balance too low")
        return Decision.of<AccountEvent>({ events: [{ type: "account.withdrawn", amount: command.amount }] })
      case "account.touch":
        return Decision.none()
      case "account.explode":
        throw new Error("decider bug")
      default:
        return Decision.reject("unknown", "unknown command")
    }
  }
})

/** The read model: one row per account, updated in the commit transaction. */
export const Balances = Projection.make(Account, {
  name: "account_balances",
  setup: Effect.flatMap(SqlClient, (sql) =>
    sql`CREATE TABLE IF NOT EXISTS account_balances (account_id TEXT PRIMARY KEY, owner TEXT NOT NULL, balance INTEGER NOT NULL)`.pipe(
      Effect.asVoid
    )
  ),
  reset: Effect.flatMap(SqlClient, (sql) => sql`DELETE FROM account_balances`.pipe(Effect.asVoid)),
  apply: (event, record) =>
    Effect.flatMap(SqlClient, (sql) => {
      switch (event.type) {
        case "account.opened":
          return sql`INSERT INTO account_balances ${sql.insert({ account_id: record.aggregateId, owner: event.owner, balance: 0 })}`.pipe(
            Effect.asVoid
          )
        case "account.deposited":
          return sql`UPDATE account_balances SET balance = balance + ${event.amount} WHERE account_id = ${record.aggregateId}`.pipe(
            Effect.asVoid
          )
        case "account.withdrawn":
          return sql`UPDATE account_balances SET balance = balance - ${event.amount} WHERE account_id = ${record.aggregateId}`.pipe(
            Effect.asVoid
          )
      }
    })
})

/** Where mail goes, and how long sending takes (EMAIL_DELAY_MS, so shutdown tests see work in flight). */
export class Mailbox extends Context.Tag("server/example/Mailbox")<
  Mailbox,
  { readonly file: string; readonly delayMs: number }
>() {}

export const EmailReactor = Reactor.make({
  name: "email",
  kinds: { "email.send": { onProcessLoss: "replay-safe", timeout: "1 minute" } },
  concurrency: 4,
  retry: { maxAttempts: 3, base: "200 millis", cap: "2 seconds" },
  handle: (row) =>
    Effect.gen(function* () {
      const mailbox = yield* Mailbox
      const { to } = row.payload as { readonly to: string }
      if (mailbox.delayMs > 0) yield* Effect.sleep(Duration.millis(mailbox.delayMs))
      if (to.startsWith("bounce@"))
        return yield* new EffectFailure({ message: `mailbox ${to} does not exist`, retryable: false, code: "bounced" })
      yield* Effect.tryPromise({
        try: async () => {
          await mkdir(join(mailbox.file, ".."), { recursive: true })
          await appendFile(mailbox.file, `${JSON.stringify({ effectId: row.effectId, to })}\n`)
        },
        catch: (error) =>
          new EffectFailure({ message: `could not write the mail log: ${String(error)}`, retryable: true })
      })
      return { delivered: to }
    })
})

export const domain = ServerDomain.make({
  name: "accounts (example)",
  aggregates: [Account],
  projections: [Balances],
  reactors: [EmailReactor],
  exampleCommand: { type: "account.open", accountId: "acc-1", owner: "ada@example.com" },
  layer: ({ dataDir, env }) =>
    Layer.succeed(Mailbox, { file: join(dataDir, "mail.log"), delayMs: Number(env.EMAIL_DELAY_MS ?? 0) || 0 })
})
