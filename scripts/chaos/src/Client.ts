/**
 * A client as a real one behaves: every command carries its own id and is retried with that same id
 * after a connection error or a 503, until the server answers it. What was acknowledged is recorded,
 * so the invariants can prove nothing acknowledged was lost or applied twice. Answers are decoded with
 * the server's own schemas (a changed shape fails loudly, never guessed at).
 */
import { Api, ApiErrors } from "@orchestration/server"
import { Option, Schema } from "effect"

const accepted = Schema.decodeUnknownSync(Api.DispatchAnswer)
const rejected = Schema.decodeUnknownSync(ApiErrors.Wire.CommandRejected)

export interface Command {
  readonly commandId: string
  readonly type: string
  readonly [field: string]: unknown
}

export interface Ack {
  readonly sequence: number
  readonly status: "accepted" | "rejected"
}

export interface ClientStats {
  acked: number
  retriesAfterAck: number
  duplicateViolations: Array<string>
}

export const json = async (url: string, init?: RequestInit): Promise<Answer> => {
  const response = await fetch(url, init)
  const text = await response.text()
  let body: unknown = text
  try {
    body = text.length > 0 ? JSON.parse(text) : null
  } catch {
    // swallow-ok: a non-JSON body is kept as text; the fuzz checks count it as an untyped error
  }
  return { status: response.status, body }
}

/** A raw answer: its status and its body (parsed JSON, or the text when it is not JSON). */
export interface Answer {
  readonly status: number
  readonly body: unknown
}

/**
 * The body of an answer with `status`, decoded with the server's schema for that answer; undefined
 * for any other status. An answer with `status` in another shape throws (it is never guessed at).
 */
export const bodyAt = <A, I>(answer: Answer, status: number, schema: Schema.Schema<A, I>): A | undefined =>
  answer.status === status ? Schema.decodeUnknownSync(schema)(answer.body) : undefined

/** The body, when it has the shape `schema` decodes (a refusal the harness expects); undefined otherwise. */
export const bodyAs = <A, I>(answer: Answer, schema: Schema.Schema<A, I>): A | undefined =>
  Option.getOrUndefined(Schema.decodeUnknownOption(schema)(answer.body))

export const makeClient = () => {
  const acked = new Map<string, Ack>()
  const pending = new Map<string, Command>()
  /** Every command ever submitted, so acknowledged ones can be re-sent byte for byte. */
  const commands = new Map<string, Command>()
  const stats: ClientStats = { acked: 0, retriesAfterAck: 0, duplicateViolations: [] }

  /** One attempt. Returns true when the command is settled for this client (acknowledged or refused for good). */
  const attempt = async (base: string, command: Command): Promise<boolean> => {
    let result: Answer
    try {
      result = await json(`${base}/v1/commands`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(command),
        signal: AbortSignal.timeout(10_000)
      })
    } catch {
      return false // swallow-ok: connection refused or cut: the same id is retried later
    }
    if (result.status === 503) return false
    const previous = acked.get(command.commandId)
    if (result.status === 200 || result.status === 422) {
      const answer = result.status === 200 ? accepted(result.body) : rejected(result.body)
      const ack: Ack = {
        sequence: "sequence" in answer ? answer.sequence : -1,
        status: result.status === 200 ? "accepted" : "rejected"
      }
      if (previous !== undefined) {
        stats.retriesAfterAck++
        // A retry of an acknowledged command must be answered from its receipt, never applied again.
        if (!answer.duplicate || (ack.status === "accepted" && ack.sequence !== previous.sequence)) {
          stats.duplicateViolations.push(
            `${command.commandId}: retry answered ${JSON.stringify(result.body).slice(0, 200)}`
          )
        }
      } else {
        acked.set(command.commandId, ack)
        stats.acked++
      }
      pending.delete(command.commandId)
      return true
    }
    throw new Error(
      `unexpected answer ${result.status} to ${command.commandId}: ${JSON.stringify(result.body).slice(0, 300)}`
    )
  }

  return {
    acked,
    pending,
    stats,
    /** Queues a command; it is sent now and retried until answered. */
    submit: (command: Command) => {
      commands.set(command.commandId, command)
      pending.set(command.commandId, command)
    },
    /** Sends every command not yet answered, in order; stops early if the server went away. */
    flush: async (base: string) => {
      for (const command of [...pending.values()]) {
        if (!(await attempt(base, command))) return false
      }
      return true
    },
    /** Re-sends already acknowledged commands: each must come back as a duplicate. */
    replay: async (base: string, commandIds: ReadonlyArray<string>) => {
      for (const id of commandIds) {
        const command = commands.get(id)
        if (command !== undefined) await attempt(base, command)
      }
    }
  }
}
export type Client = ReturnType<typeof makeClient>
