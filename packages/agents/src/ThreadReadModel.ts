/**
 * The thread read models, updated in the commit transaction of the events they show: threads, turns,
 * tool calls, and the provider-ready transcript. Their tables are in `ThreadTables.ts`, how each event
 * moves them in `ThreadProjection.ts`, and the reads in `ThreadQueries.ts` and `ThreadList.ts`.
 */
import { Projection } from "@orchestration/engine"
import { Thread } from "./Thread.js"
import { applyThreadEvent } from "./ThreadProjection.js"
import { resetThreadTables, setupThreadTables } from "./ThreadTables.js"

export const ThreadViews = Projection.make(Thread, {
  name: "agent_threads",
  setup: setupThreadTables,
  reset: resetThreadTables,
  apply: applyThreadEvent
})

export * from "./ThreadList.js"
export * from "./ThreadQueries.js"
