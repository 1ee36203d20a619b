/**
 * A command that asks the server once and prints the answer: the connection options (`--url`,
 * `--token`, `--json`) join its own, and the answer is printed readable or, with `--json`, as JSON.
 * Also the two option shapes the commands share: an optional option, and a request field present
 * only when its option was given.
 */
import { Command, Options } from "@effect/cli"
import { Effect, Option } from "effect"
import * as Connection from "./Connection.js"
import * as Render from "./Render.js"
import * as ServerClient from "./ServerClient.js"

type WithConnection<Config> = Command.Command.ParseConfig<typeof Connection.connectionOptions & Config>

export const serverCommand = <Name extends string, const Config extends Command.Command.Config, A, E>(
  name: Name,
  config: Config,
  spec: {
    readonly ask: (api: ServerClient.ApiClient, options: WithConnection<Config>) => Effect.Effect<A, E>
    readonly render: (answer: A) => string
    readonly description: string
  }
) =>
  Command.make(name, { ...Connection.connectionOptions, ...config }, (options) =>
    Effect.gen(function* () {
      const parsed = options as WithConnection<Config> & Connection.ConnectionOptions
      const connection = yield* Connection.resolve(parsed)
      const answer = yield* ServerClient.call(connection, (api) => spec.ask(api, parsed))
      yield* Render.output(connection.json, answer, spec.render)
    })
  ).pipe(Command.withDescription(spec.description))

/** `{ [key]: value }` when the option was given, `{}` when not: absent options are left out of requests. */
export const whenSome = <K extends string, A>(option: Option.Option<A>, key: K): { readonly [k in K]?: A } =>
  Option.match(option, { onNone: () => ({}), onSome: (value) => ({ [key]: value }) as { readonly [k in K]: A } })

/** An optional option: `Option.none()` when not given. */
export const optional = <A>(option: Options.Options<A>, description: string) =>
  option.pipe(Options.withDescription(description), Options.optional)
