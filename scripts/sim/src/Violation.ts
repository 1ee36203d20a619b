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

export interface Violation {
  readonly invariant: Invariant
  readonly detail: string
}
