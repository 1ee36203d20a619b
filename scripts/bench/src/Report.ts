/**
 * Collects each figure's value per round and renders the table (terminal and docs/benchmarks.md).
 * A figure is a rate or a duration with, when it has them, the per-round p50 and p99 latencies.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import type { Machine } from "./Machine.js"
import { fmt, percentile, perSecond, spread, type RunResult } from "./Stats.js"

interface Figure {
  readonly name: string
  readonly unit: string
  readonly values: Array<number>
  readonly p50: Array<number>
  readonly p99: Array<number>
  note: string
}

export class Results {
  readonly figures = new Map<string, Figure>()
  readonly notes: Array<string> = []

  private figure(name: string, unit: string): Figure {
    let figure = this.figures.get(name)
    if (figure === undefined) {
      figure = { name, unit, values: [], p50: [], p99: [], note: "" }
      this.figures.set(name, figure)
    }
    return figure
  }

  /** A throughput run: ops/s plus its latency percentiles. */
  addRun(name: string, unit: string, run: RunResult, latencies: ReadonlyArray<number> = run.latenciesMs) {
    const figure = this.figure(name, unit)
    figure.values.push(perSecond(run))
    if (latencies.length > 0) {
      figure.p50.push(percentile(latencies, 50))
      figure.p99.push(percentile(latencies, 99))
    }
  }

  /** A latency distribution only (e.g. pickup): the value is its p50. */
  addLatencies(name: string, latencies: ReadonlyArray<number>) {
    const figure = this.figure(name, "ms")
    figure.values.push(percentile(latencies, 50))
    figure.p50.push(percentile(latencies, 50))
    figure.p99.push(percentile(latencies, 99))
  }

  addValue(name: string, unit: string, value: number) {
    this.figure(name, unit).values.push(value)
  }

  setNote(name: string, note: string) {
    const figure = this.figures.get(name)
    if (figure !== undefined) figure.note = note
  }

  median(name: string): number {
    const figure = this.figures.get(name)
    return figure === undefined ? Number.NaN : spread(figure.values).median
  }

  table(): string {
    const lines = [
      "| measurement | unit | min | median | max | p50 ms (median) | p99 ms (median) | rounds | note |",
      "|---|---|---:|---:|---:|---:|---:|---:|---|"
    ]
    for (const f of this.figures.values()) {
      const s = spread(f.values)
      const digits = f.unit === "ms" || f.unit === "MB" ? 1 : 0
      const p50 = f.p50.length > 0 ? fmt(spread(f.p50).median, 2) : ""
      const p99 = f.p99.length > 0 ? fmt(spread(f.p99).median, 2) : ""
      lines.push(
        `| ${f.name} | ${f.unit} | ${fmt(s.min, digits)} | ${fmt(s.median, digits)} | ${fmt(s.max, digits)} | ${p50} | ${p99} | ${f.values.length} | ${f.note} |`
      )
    }
    return lines.join("\n")
  }
}

export interface Ratio {
  readonly name: string
  readonly value: number
  readonly target: string
  readonly met: boolean | undefined
}

export const renderMarkdown = (
  profile: string,
  machine: Machine,
  results: Results,
  ratios: ReadonlyArray<Ratio>,
  summary: string
) =>
  [
    `### ${profile === "full" ? "Full run (`pnpm bench`)" : "Quick run (`pnpm bench --quick`; smaller sizes, fewer rounds, noisier)"}`,
    "",
    `- date: ${machine.date}`,
    `- machine: ${machine.cpus} CPUs (nproc), memory (free -m) \`${machine.memory}\`, data in ${machine.dataDir}`,
    `- node ${machine.node}, SQLite ${machine.sqlite}; ${machine.versions.map(([n, v]) => `${n} ${v}`).join(", ")}`,
    "",
    results.table(),
    "",
    "| ratio (ours ÷ theirs) | value | target | met |",
    "|---|---:|---|---|",
    ...ratios.map(
      (r) => `| ${r.name} | ${fmt(r.value, 2)} | ${r.target} | ${r.met === undefined ? "n/a" : r.met ? "yes" : "no"} |`
    ),
    "",
    ...results.notes.map((n) => `- ${n}`),
    "",
    "```",
    summary,
    "```",
    ""
  ].join("\n")

const header = `# Benchmarks

Produced by \`scripts/bench\`: \`pnpm bench\` for the full run, \`pnpm bench --quick\` for a run under a
minute. Every figure is the min/median/max over rounds; baselines (floor, fsync, peers) run interleaved with the
engine in the same process, so the ratios matter more than absolute numbers on a shared machine. Rates are per
second; latencies are the p50/p99 of each round, medianed across rounds.
`

/** Replaces this profile's section of docs/benchmarks.md, keeping the other profile's. */
export const writeDoc = (path: string, profile: string, section: string) => {
  const start = `<!-- bench:${profile}:start -->`
  const end = `<!-- bench:${profile}:end -->`
  const block = `${start}\n${section}${end}`
  let doc = existsSync(path) ? readFileSync(path, "utf8") : header
  if (!doc.startsWith("# Benchmarks")) doc = header
  const from = doc.indexOf(start)
  const to = doc.indexOf(end)
  if (from >= 0 && to > from) doc = doc.slice(0, from) + block + doc.slice(to + end.length)
  else if (profile === "full" && doc.includes("<!-- bench:quick:start -->")) {
    // The full run goes above the quick one.
    const q = doc.indexOf("<!-- bench:quick:start -->")
    doc = `${doc.slice(0, q)}${block}\n\n${doc.slice(q)}`
  } else doc = `${doc.trimEnd()}\n\n${block}\n`
  writeFileSync(path, doc)
}
