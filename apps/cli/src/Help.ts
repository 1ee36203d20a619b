/**
 * Help and messages as their reader gets them.
 * - Colour only for a terminal that wants it: output that is not a TTY, `NO_COLOR` set and not empty
 *   (no-color.org) or `TERM=dumb` get plain text, so `orchestrator --help | less` or a log file holds
 *   no escape codes. @effect/cli always renders its help and usage errors with ANSI styles, so the
 *   console they are written through removes them where colour is not wanted.
 * - Each option says what it is for: @effect/cli puts its value type's generic sentence ("A
 *   user-defined piece of text.") before the option's own description; the usage line already shows
 *   the type, so where an option has a description of its own the sentence is dropped. A choice keeps
 *   its sentence, which lists the values allowed.
 */
import { Args, type CliConfig, HelpDoc, Options, Usage } from "@effect/cli"
import type { ShowHelp } from "@effect/cli/BuiltInOptions"
import * as Span from "@effect/cli/HelpDoc/Span"
import { Console, Effect } from "effect"

/** Pure: whether text written to `stream` may carry colour. */
export const colourWanted = (
  stream: { readonly isTTY?: boolean | undefined },
  env: Readonly<Record<string, string | undefined>>
): boolean => stream.isTTY === true && (env.NO_COLOR ?? "") === "" && env.TERM !== "dumb"

/** Control sequences (CSI): colours, bold, cursor moves. */
const controlSequence = /\u001b\[[0-9;?]*[A-Za-z]/g

export const plain = (text: string): string => text.replace(controlSequence, "")

const plainArgs = (args: ReadonlyArray<unknown>) => args.map((arg) => (typeof arg === "string" ? plain(arg) : arg))

/** The console `base` with colour removed from what goes to stdout and/or stderr. */
export const consoleWith = (
  base: Console.Console,
  colour: { readonly stdout: boolean; readonly stderr: boolean }
): Console.Console => ({
  ...base,
  log: (...args) => base.log(...(colour.stdout ? args : plainArgs(args))),
  info: (...args) => base.info(...(colour.stdout ? args : plainArgs(args))),
  error: (...args) => base.error(...(colour.stderr ? args : plainArgs(args))),
  warn: (...args) => base.warn(...(colour.stderr ? args : plainArgs(args))),
  unsafe: {
    ...base.unsafe,
    log: (...args) => base.unsafe.log(...(colour.stdout ? args : plainArgs(args))),
    info: (...args) => base.unsafe.info(...(colour.stdout ? args : plainArgs(args))),
    error: (...args) => base.unsafe.error(...(colour.stderr ? args : plainArgs(args))),
    warn: (...args) => base.unsafe.warn(...(colour.stderr ? args : plainArgs(args)))
  }
})

/** Runs `effect` with colour only where this process's stdout and stderr want it. */
export const withTerminalColour = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.console, (base) =>
    Effect.withConsole(
      effect,
      consoleWith(base, {
        stdout: colourWanted(process.stdout, process.env),
        stderr: colourWanted(process.stderr, process.env)
      })
    )
  )

const spanText = (span: Span.Span): string => {
  switch (span._tag) {
    case "Text":
    case "URI":
      return span.value
    case "Sequence":
      return spanText(span.left) + spanText(span.right)
    case "Highlight":
    case "Strong":
    case "Weak":
      return spanText(span.value)
  }
}

const leaves = (doc: HelpDoc.HelpDoc): ReadonlyArray<HelpDoc.HelpDoc> =>
  doc._tag === "Sequence" ? [...leaves(doc.left), ...leaves(doc.right)] : doc._tag === "Empty" ? [] : [doc]

const firstParagraph = (doc: HelpDoc.HelpDoc): string | undefined => {
  const first = leaves(doc)[0]
  return first?._tag === "Paragraph" ? spanText(first.value) : undefined
}

const firstDefinitionParagraph = (doc: HelpDoc.HelpDoc): string | undefined => {
  const list = leaves(doc).find(HelpDoc.isDescriptionList)
  return list === undefined ? undefined : firstParagraph(list.definitions[0][1])
}

/** The library's own sentences for value types, taken from the library so they follow its wording. */
const typeSentences: ReadonlySet<string> = new Set(
  [
    Options.getHelp(Options.text("x")),
    Options.getHelp(Options.boolean("x")),
    Options.getHelp(Options.integer("x")),
    Options.getHelp(Options.float("x")),
    ...(["yes", "no", "either"] as const).flatMap((exists) => [
      Options.getHelp(Options.file("x", { exists })),
      Options.getHelp(Options.directory("x", { exists })),
      Args.getHelp(Args.file({ exists })),
      Args.getHelp(Args.directory({ exists })),
      Args.getHelp(Args.path({ exists }))
    ]),
    Args.getHelp(Args.text()),
    Args.getHelp(Args.integer())
  ].flatMap((doc) => firstDefinitionParagraph(doc) ?? [])
)

/** Drops the value type's sentence from a definition that has a description of its own. */
const describedOnly = (block: HelpDoc.HelpDoc): HelpDoc.HelpDoc => {
  const parts = leaves(block)
  const first = parts[0]
  return parts.length > 1 && first?._tag === "Paragraph" && typeSentences.has(spanText(first.value))
    ? HelpDoc.blocks(parts.slice(1))
    : block
}

/** Pure: the help document with each described option and argument saying only what it is for. */
export const withoutTypeSentences = (doc: HelpDoc.HelpDoc): HelpDoc.HelpDoc => {
  switch (doc._tag) {
    case "DescriptionList":
      return HelpDoc.descriptionList(
        doc.definitions.map(([span, block]) => [span, describedOnly(block)] as [Span.Span, HelpDoc.HelpDoc]) as [
          [Span.Span, HelpDoc.HelpDoc],
          ...Array<[Span.Span, HelpDoc.HelpDoc]>
        ]
      )
    case "Sequence":
      return HelpDoc.sequence(withoutTypeSentences(doc.left), withoutTypeSentences(doc.right))
    default:
      return doc
  }
}

/** The whole help page, laid out as @effect/cli lays out its own: banner, version, usage, the command's help. */
export const page = (
  app: { readonly name: string; readonly version: string },
  help: ShowHelp,
  config: CliConfig.CliConfig
): string =>
  HelpDoc.toAnsiText(
    HelpDoc.blocks([
      HelpDoc.h1(Span.code(app.name)),
      HelpDoc.p(`${app.name} ${app.version}`),
      HelpDoc.h1("USAGE"),
      ...Usage.enumerate(help.usage, config).map((span) => HelpDoc.p(Span.concat(Span.text("$ "), span))),
      withoutTypeSentences(help.helpDoc)
    ])
  )

/** Prints the help page (through the console, so colour follows the terminal). */
export const print = (
  app: { readonly name: string; readonly version: string },
  help: ShowHelp,
  config: CliConfig.CliConfig
) => Console.log(page(app, help, config))
