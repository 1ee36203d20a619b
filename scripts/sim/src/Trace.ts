/**
 * The ordered record of what a simulation did, as the outside world saw it. Its digest (SHA-256 of
 * the lines) is the proof of determinism: two runs of one seed must produce the same lines.
 */
import { createHash } from "node:crypto"

export class Trace {
  readonly lines: Array<string> = []
  constructor(private readonly now: () => number) {}

  add(kind: string, detail: string) {
    this.lines.push(`${this.now()} ${kind} ${detail}`)
  }

  digest(): string {
    const hash = createHash("sha256")
    for (const line of this.lines) hash.update(line).update("\n")
    return hash.digest("hex").slice(0, 16)
  }

  tail(n: number): ReadonlyArray<string> {
    return this.lines.slice(-n)
  }
}
