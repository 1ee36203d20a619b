/**
 * Readable output: aligned tables and label/value blocks laid out with @effect/printer, and the few
 * formats operators read (bytes, ages, times). Plain text, no colour, so output can be piped and
 * compared; `--json` output does not come through here.
 */
import * as Doc from "@effect/printer/Doc"
import { Console, type Effect } from "effect"

const renderDoc = (doc: Doc.Doc<never>) => Doc.render(doc, { style: "pretty", options: { lineWidth: 10_000 } })

/** Columns padded to their widest cell, two spaces apart; the last column is not padded. */
export const table = (headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const all = [headers, ...rows]
  const widths = headers.map((_, column) => Math.max(...all.map((row) => (row[column] ?? "").length)))
  const line = (row: ReadonlyArray<string>) =>
    Doc.hcat(
      headers.map((_, column) => {
        const cell = Doc.text(row[column] ?? "")
        return column === headers.length - 1 ? cell : Doc.cat(Doc.fill(cell, widths[column]!), Doc.text("  "))
      })
    )
  return renderDoc(Doc.vsep(all.map(line)))
    .split("\n")
    .map((l) => l.trimEnd())
    .join("\n")
}

/** `label  value` lines, labels aligned. */
export const fields = (pairs: ReadonlyArray<readonly [string, string]>): string => {
  const width = Math.max(0, ...pairs.map(([label]) => label.length))
  return renderDoc(
    Doc.vsep(pairs.map(([label, value]) => Doc.hsep([Doc.fill(Doc.text(label), width), Doc.text(value)])))
  )
}

/** A titled block, its body indented by two. */
export const section = (title: string, body: string): string =>
  renderDoc(Doc.vsep([Doc.text(title), Doc.indent(Doc.vsep(body.split("\n").map((l) => Doc.text(l))), 2)]))
    .split("\n")
    .map((l) => l.trimEnd())
    .join("\n")

export const bytes = (n: number): string => {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"]
  let value = n
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }
  return unit === 0 ? `${n} B` : `${value.toFixed(1)} ${units[unit]}`
}

export const duration = (ms: number): string => {
  if (ms < 1_000) return `${Math.round(ms)} ms`
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`
  if (ms < 3_600_000) return `${(ms / 60_000).toFixed(1)} min`
  return `${(ms / 3_600_000).toFixed(1)} h`
}

export const time = (epochMs: number | null | undefined): string =>
  epochMs === null || epochMs === undefined ? "-" : new Date(epochMs).toISOString()

/** A value of unknown shape on one line (payloads, responses, errors). */
export const compact = (value: unknown, max = 120): string => {
  if (value === null || value === undefined) return "-"
  const text = typeof value === "string" ? value : JSON.stringify(value)
  return text.length > max ? `${text.slice(0, max - 1)}…` : text
}

export const print = (text: string) => Console.log(text)

export const printJson = (value: unknown) => Console.log(JSON.stringify(value, null, 2))

/** Readable text, or the value as JSON with `--json`. */
export const output = <A>(json: boolean, value: A, readable: (value: A) => string): Effect.Effect<void> =>
  json ? printJson(value) : print(readable(value))
