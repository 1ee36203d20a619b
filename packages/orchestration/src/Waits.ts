/**
 * Awaiting an external answer, as pure functions over a domain's state. A wait is opened with a
 * deadline; the deadline is a durable timer whose command closes the wait as timed out; a command
 * that answers the wait closes it as answered and cancels the timer. Both closing commands pass
 * through the aggregate's decide one at a time, so whichever lands second finds the wait closed and
 * gets a Rejection (`wait-closed`): a stored rejected receipt, never an error in the log.
 *
 * The domain keeps a `WaitsState` in its state, records its own events (e.g. `approval.requested`,
 * `approval.granted`, `approval.expired`) and folds them with `opened` / `closed`; the functions here
 * answer whether the command may close the wait and which timer pieces the Decision carries.
 */
import { HashMap, Option } from "effect"
import { Decision, type Rejection } from "./Aggregate.js"
import type { TimerIntent } from "./Timers.js"

export interface Wait {
  readonly status: "open" | "answered" | "timed-out"
  readonly deadline: number
  /** Names this opening (the opening command's id): a timeout of an earlier wait of the name is stale. */
  readonly token: string
}

/**
 * The waits by name. A persistent map: a domain keeps its waits for its life (a late answer is judged
 * against them), and an object copied whole on each opening and closing made a long-lived aggregate's
 * fold quadratic (5,000 approvals took 23 s).
 */
export type WaitsState = HashMap.HashMap<string, Wait>

export const empty: WaitsState = HashMap.empty()

/** The wait of that name, if one was ever opened. */
export const get = (waits: WaitsState, name: string): Wait | undefined =>
  Option.getOrUndefined(HashMap.get(waits, name))

/** The deadline timer's id within the aggregate. */
export const timerIdOf = (name: string): string => `wait.${name}`

/**
 * Opening a wait: refused while one of that name is open. `timeout` is the command that closes it as
 * timed out (the domain's type and routing fields); it is sent with `wait` and `token` added.
 */
export const open = (
  waits: WaitsState,
  request: {
    readonly name: string
    readonly deadline: number
    readonly token: string
    readonly timeout: { readonly type: string; readonly [field: string]: unknown }
  }
): Rejection | { readonly wait: Wait; readonly timers: ReadonlyArray<TimerIntent> } => {
  if (get(waits, request.name)?.status === "open") {
    return Decision.reject("wait-already-open", `wait '${request.name}' is already open`)
  }
  return {
    wait: { status: "open", deadline: request.deadline, token: request.token },
    timers: [
      {
        timerId: timerIdOf(request.name),
        at: request.deadline,
        command: { ...request.timeout, wait: request.name, token: request.token }
      }
    ]
  }
}

const closedRejection = (name: string, wait: Wait | undefined): Rejection | undefined => {
  if (wait === undefined) return Decision.reject("wait-unknown", `no wait '${name}'`)
  if (wait.status !== "open") return Decision.reject("wait-closed", `wait '${name}' is already ${wait.status}`)
  return undefined
}

/** Answering: allowed only while open; the decision cancels the deadline timer. */
export const answer = (waits: WaitsState, name: string): Rejection | { readonly cancelTimers: ReadonlyArray<string> } =>
  closedRejection(name, get(waits, name)) ?? { cancelTimers: [timerIdOf(name)] }

/** The deadline's command: allowed only while this very opening is open. */
export const timeout = (waits: WaitsState, name: string, token: string): Rejection | { readonly cancelTimers: [] } => {
  const wait = get(waits, name)
  const closed = closedRejection(name, wait)
  if (closed !== undefined) return closed
  if (wait!.token !== token) return Decision.reject("wait-closed", `wait '${name}' was opened again since`)
  return { cancelTimers: [] }
}

export const isRejection = <A>(answer: Rejection | A): answer is Rejection =>
  typeof answer === "object" && answer !== null && (answer as { _tag?: unknown })._tag === "Rejection"

/** For evolve: the wait is open. */
export const opened = (waits: WaitsState, name: string, wait: Wait): WaitsState => HashMap.set(waits, name, wait)

/** For evolve: the wait closed, answered or timed out. */
export const closed = (waits: WaitsState, name: string, status: "answered" | "timed-out"): WaitsState => {
  const wait = get(waits, name)
  return wait === undefined ? waits : HashMap.set(waits, name, { ...wait, status })
}
