/**
 * The chaos harness: `pnpm chaos [--quick] [--seed N] [--cycles N] [--disk-full] [--fuzz] [--allow-skip]`,
 * and `pnpm chaos --postgres [--nodes 3] [--triggers 3] [--quick]` for several server processes on one PostgreSQL.
 * Without a mode flag it runs the crash mode; `--quick` runs all three (the CI profile) and prints the
 * three summary lines, the `chaos:` line last. Exits 1 on any violation.
 */
import { runCrash } from "./CrashMode.js"
import type { StreamVerdict } from "./ThreadStreamFollower.js"

const args = process.argv.slice(2)
const flag = (name: string) => args.includes(`--${name}`)
const value = (name: string, fallback: number) => {
  const index = args.indexOf(`--${name}`)
  if (index < 0) return fallback
  const parsed = Number(args[index + 1])
  if (!Number.isInteger(parsed)) throw new Error(`--${name} needs a whole number`)
  return parsed
}

const log = (line: string) => process.stderr.write(`${line}\n`)

/** The stream judge's counters as both summary lines print them. */
const streamFields = (s: StreamVerdict, reconnects: number) =>
  `sse_deltas=${s.deltas} sse_dups=${s.dups} sse_gaps=${s.gaps} sse_unmarked=${s.unmarked} sse_superseded=${s.superseded} ` +
  `sse_answer_mismatches=${s.answerMismatches} sse_reconnects=${reconnects} store_chunk_overlaps=${s.storeDuplicates} store_reader_mismatches=${s.storeMismatches}`

/** No stream violation, and something streamed (a run whose readers saw no delta proves nothing about them). */
const streamClean = (s: StreamVerdict) =>
  s.deltas > 0 &&
  s.dups === 0 &&
  s.gaps === 0 &&
  s.unmarked === 0 &&
  s.answerMismatches === 0 &&
  s.storeDuplicates === 0 &&
  s.storeMismatches === 0

const main = async () => {
  const quick = flag("quick")
  const seed = value("seed", 1)
  if (flag("postgres")) {
    // Several server processes on one PostgreSQL database; the quick profile runs it too (below).
    const { runMultiNode } = await import("./MultiNodeMode.js")
    const nodes = value("nodes", 3)
    const cycles = value("cycles", quick ? 12 : 60)
    log(`chaos: postgres nodes=${nodes} seed=${seed} cycles=${cycles}`)
    const triggers = value("triggers", 3)
    const result = await runMultiNode({ cycles, seed, nodes, threads: value("threads", 4), triggers, log })
    for (const detail of result.report.details.slice(0, 30)) log(`chaos: violation: ${detail}`)
    for (const detail of result.ticks.details.slice(0, 30)) log(`chaos: violation: ${detail}`)
    const r = result.report
    const t = result.ticks
    console.log(
      `chaos: postgres nodes=${nodes} cycles=${result.cycles} kills=${result.kills} acked=${result.acked} lost=${r.lost} ` +
        `duplicate_effects=${r.duplicateEffects} transcript_violations=${r.transcriptViolations} unsettled=${r.unsettled} ` +
        `trigger_ticks=${t.ticks} duplicate_ticks=${t.duplicates} missed_ticks=${t.missed} ${streamFields(result.stream, result.reconnects)}`
    )
    const ok =
      streamClean(result.stream) &&
      r.lost === 0 &&
      r.duplicateEffects === 0 &&
      r.transcriptViolations === 0 &&
      r.unsettled === 0 &&
      r.details.length === 0 &&
      // A run whose triggers never ticked proves nothing about them: it fails too.
      t.ticks > 0 &&
      t.duplicates === 0 &&
      t.missed === 0 &&
      t.details.length === 0
    return ok ? 0 : 1
  }
  let failed = false
  if (flag("fuzz") || quick) {
    const { runFuzz } = await import("./FuzzMode.js")
    const fuzz = await runFuzz({ requests: value("requests", quick ? 500 : 5_000), seed, log })
    console.log(fuzz.line)
    failed ||= !fuzz.ok
    if (!quick) return failed ? 1 : 0
  }
  if (flag("disk-full") || quick) {
    const { runDiskFull } = await import("./DiskFullMode.js")
    const disk = await runDiskFull({ seed, allowSkip: flag("allow-skip"), log })
    console.log(disk.line)
    failed ||= !disk.ok
    if (!quick) return failed ? 1 : 0
  }
  const cycles = value("cycles", quick ? 24 : 100)
  log(`chaos: seed=${seed} cycles=${cycles}`)
  const result = await runCrash({
    cycles,
    seed,
    threads: value("threads", quick ? 4 : 8),
    workEvery: value("work-every", 1),
    log
  })
  for (const detail of result.report.details.slice(0, 30)) log(`chaos: violation: ${detail}`)
  const r = result.report
  const s = result.stream
  console.log(
    `chaos: cycles=${result.cycles} kills=${result.kills} acked=${result.acked} lost=${r.lost} duplicate_effects=${r.duplicateEffects} ` +
      `transcript_violations=${r.transcriptViolations} unsettled=${r.unsettled} sandbox_runs=${r.sandboxRuns} ` +
      `max_runs_per_effect=${r.maxRunsPerEffect} sandbox_processes_at_kills=${result.sandboxSeen} sandbox_processes_left=${result.sandboxLeft} sandbox_orphans_swept_at_boot=${result.sandboxSwept} ` +
      streamFields(s, result.reconnects)
  )
  const ok =
    streamClean(s) &&
    r.lost === 0 &&
    r.duplicateEffects === 0 &&
    r.transcriptViolations === 0 &&
    r.unsettled === 0 &&
    result.report.details.length === 0
  return failed || !ok ? 1 : 0
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
