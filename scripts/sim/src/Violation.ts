/** The invariants the simulation enforces, by name; a violation names one and says what broke it. */
export type Invariant =
  | "acknowledged-lost"
  | "retry-applied-twice"
  | "log-gap"
  | "reader-skipped"
  | "process-bound-performed-twice"
  | "result-recorded-twice"
  | "transcript-invalid"
  | "not-quiescent"
  | "refused-write-hidden"
  | "unexpected-error"
  /** A test's own check of the world (SimOptions.probe); the simulator never raises it itself. */
  | "probe"

export interface Violation {
  readonly invariant: Invariant
  readonly detail: string
}
