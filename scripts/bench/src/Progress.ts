/** Progress lines on stderr, so the table and the summary line on stdout stay clean for scripts. */
const started = performance.now()

export const progress = (message: string) => {
  const seconds = ((performance.now() - started) / 1000).toFixed(1)
  process.stderr.write(`[bench ${seconds}s] ${message}\n`)
}
