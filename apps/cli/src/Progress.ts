/**
 * A progress bar for long offline work (db check, db backup), on stderr so stdout stays the report.
 * It is drawn only when asked (`--progress`) or when stderr is a terminal and the work is large, and
 * redrawn only when the whole percentage changes, so it costs nothing per row and needs no timer.
 */
export interface Progress {
  /** Sets the amount done (out of `total`). */
  readonly set: (done: number) => void
  readonly advance: (n: number) => void
  /** Draws 100% and ends the line. */
  readonly finish: () => void
}

const silent: Progress = { set: () => {}, advance: () => {}, finish: () => {} }

export interface ProgressOptions {
  readonly label: string
  readonly total: number
  readonly unit: string
  /** `--progress`: draw even when stderr is not a terminal. */
  readonly forced: boolean
  /** Below this total, a terminal gets no bar (it would flash by). */
  readonly largeFrom?: number
  readonly write?: (text: string) => void
}

export const make = (options: ProgressOptions): Progress => {
  const tty = process.stderr.isTTY === true
  const large = options.total >= (options.largeFrom ?? 20_000)
  if (!options.forced && !(tty && large)) return silent
  const write = options.write ?? ((text: string) => void process.stderr.write(text))
  const total = Math.max(options.total, 1)
  let done = 0
  let drawn = -1
  const draw = (percent: number, end: string) => {
    const width = 30
    const filled = Math.round((percent / 100) * width)
    // On a terminal the line is redrawn in place; elsewhere each step is its own line.
    write(
      `${tty ? "\r" : ""}${options.label} [${"#".repeat(filled)}${".".repeat(width - filled)}] ${String(percent).padStart(3)}% ${Math.min(done, options.total)}/${options.total} ${options.unit}${tty ? end : "\n"}`
    )
  }
  const set = (value: number) => {
    done = value
    // A terminal redraws every percent; a log file gets a line every ten.
    const step = tty ? 1 : 10
    const percent = Math.min(100, Math.floor((done / total) * (100 / step)) * step)
    if (percent !== drawn && percent < 100) {
      drawn = percent
      draw(percent, "")
    }
  }
  return {
    set,
    advance: (n) => set(done + n),
    finish: () => {
      done = options.total
      drawn = 100
      draw(100, "\n")
    }
  }
}
