/**
 * Emmett's SQLite event store with a `CommandHandler` appending one `CounterBumped` event per command.
 * Plain JavaScript, loaded by scripts/bench/src/Emmett.ts with a dynamic import, so the workspace
 * neither installs nor type-checks Emmett and its `sqlite3` driver (see install.mjs).
 */
import { CommandHandler } from "@event-driven-io/emmett"
import { getSQLiteEventStore } from "@event-driven-io/emmett-sqlite"

const handle = CommandHandler({
  evolve: (state) => ({ bumps: state.bumps + 1 }),
  initialState: () => ({ bumps: 0 })
})

/** A store on `fileName`; `bump(streamId, n)` appends one event to that stream. */
export const open = (fileName) => {
  const store = getSQLiteEventStore({ fileName, schema: { autoMigration: "CreateOrUpdate" } })
  return {
    bump: async (streamId, n) => {
      await handle(store, streamId, () => ({ type: "CounterBumped", data: { n } }))
    }
  }
}
