/**
 * The engine on its own, until the server exists: opens the embedded store under DATA_DIR
 * (default ./data), dispatches a few commands of the example account domain and prints what the
 * front door answers, including a retry (answered from its receipt), a conflict and a rejection.
 * Run it twice: the second run answers the same commands from the receipts on disk.
 */
import { Effect, Layer } from "effect"
import { join } from "node:path"
import { Engine, SqliteStore } from "../src/index.js"
import { Account, Balances } from "./Accounts.js"

const dataDir = process.env.DATA_DIR ?? "./data"
const filename = join(dataDir, "example.db")

const show = (label: string, value: unknown) => console.log(`${label.padEnd(34)} ${JSON.stringify(value)}`)

const program = Effect.gen(function* () {
  const engine = yield* Engine.Engine
  console.log(`engine on ${filename} (log head ${(yield* engine.stats).head})\n`)
  const open = { commandId: "example-open-1", type: "account.open", accountId: "acc-1", owner: "ada" }
  const deposit = { commandId: "example-deposit-1", type: "account.deposit", accountId: "acc-1", amount: 100 }

  const opened = yield* engine.dispatchWithReceipt(open)
  show("open acc-1", { sequence: opened.sequence, effectIds: opened.effectIds, duplicate: opened.duplicate })
  const deposited = yield* engine.dispatchWithReceipt(deposit)
  show("deposit 100", { sequence: deposited.sequence, duplicate: deposited.duplicate })
  const retried = yield* engine.dispatchWithReceipt(deposit)
  show("retry the same deposit", { sequence: retried.sequence, duplicate: retried.duplicate })
  const conflict = yield* Effect.flip(engine.dispatchWithReceipt({ ...deposit, amount: 5 }))
  show("same id, other amount", { error: conflict._tag, message: conflict.message })
  const rejected = yield* Effect.flip(
    engine.dispatchWithReceipt({
      commandId: "example-withdraw-1",
      type: "account.withdraw",
      accountId: "acc-1",
      amount: 1_000
    })
  )
  show("withdraw 1000", { error: rejected._tag, message: rejected.message })
  const invalid = yield* Effect.flip(
    engine.dispatchWithReceipt({ commandId: "outcome:forged#1", type: "account.open", accountId: "x", owner: "y" })
  )
  show("forged engine id", { error: invalid._tag, message: invalid.message })

  console.log("\nthe log:")
  for (const event of yield* engine.readEvents({ limit: 20 })) {
    console.log(
      `  #${event.sequence} ${event.type} ${event.aggregateId} v${event.version} (command ${event.commandId})`
    )
  }
  console.log(
    "\nan acknowledgement means the command's events, read model, receipt and outbox rows committed together."
  )
})

const EngineLive = Engine.layer({ aggregates: [Account], projections: [Balances] }).pipe(
  Layer.provideMerge(SqliteStore.layer({ filename }))
)

Effect.runPromiseExit(program.pipe(Effect.provide(EngineLive))).then((exit) => {
  if (exit._tag === "Failure") {
    console.error(String(exit.cause))
    process.exit(1)
  }
})
