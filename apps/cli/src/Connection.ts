/**
 * Where the server is and how to talk to it: `--url`, `--token` and `--json`, accepted both before
 * the command (`orchestrator --url X effects list`) and after it (`orchestrator effects list --url X`).
 * The value after the command wins, then the one before it, then the environment, then the default.
 */
import { Command, Options } from "@effect/cli"
import { Config, Effect, Option } from "effect"

export const defaultUrl = "http://127.0.0.1:8787"

export const connectionOptions = {
  url: Options.text("url").pipe(
    Options.withDescription(`The server's base URL. Default: $ORCHESTRATOR_URL, else ${defaultUrl}.`),
    Options.optional
  ),
  token: Options.text("token").pipe(
    Options.withDescription("Bearer token for a server started with API_TOKEN. Default: $API_TOKEN."),
    Options.optional
  ),
  json: Options.boolean("json").pipe(
    Options.withDescription("Print the answer as JSON (one object, or one per line for streams).")
  )
}

export interface ConnectionOptions {
  readonly url: Option.Option<string>
  readonly token: Option.Option<string>
  readonly json: boolean
}

/** The root command's parsed options: the global forms of the same options. */
export const rootCommand = Command.make("orchestrator", connectionOptions)

export interface Connection {
  /** Without a trailing slash. */
  readonly url: string
  readonly token: string | undefined
  readonly json: boolean
}

const env = (name: string) =>
  Config.option(Config.string(name)).pipe(
    Effect.map(Option.filter((value) => value.trim() !== "")),
    // swallow-ok: an unreadable environment variable is treated as unset; the default applies.
    Effect.orElseSucceed(() => Option.none<string>())
  )

/** The connection a command uses: its own options over the global ones over the environment. */
export const resolve = (own: ConnectionOptions) =>
  Effect.gen(function* () {
    const global = yield* rootCommand
    const url = Option.firstSomeOf([own.url, global.url, yield* env("ORCHESTRATOR_URL")]).pipe(
      Option.getOrElse(() => defaultUrl)
    )
    const token = Option.getOrUndefined(Option.firstSomeOf([own.token, global.token, yield* env("API_TOKEN")]))
    const connection: Connection = { url: url.replace(/\/+$/, ""), token, json: own.json || global.json }
    return connection
  })
