/**
 * One place that turns a driver error into a StorageFailure. SqlError carries no classification in
 * @effect/sql 0.52, so we read the driver's code (better-sqlite3's `code`, node-postgres' SQLSTATE).
 */
import type { SqlError } from "@effect/sql/SqlError"
import { StorageFailure, type StorageFailureReason } from "../Errors.js"

const driverCode = (cause: unknown): string => {
  if (typeof cause === "object" && cause !== null && "code" in cause) {
    const code = (cause as { code: unknown }).code
    if (typeof code === "string") return code
  }
  return "UNKNOWN"
}

const driverMessage = (cause: unknown, fallback: string): string =>
  cause instanceof Error ? cause.message : typeof cause === "string" ? cause : fallback

/**
 * Pure: does this driver code say the store is held by someone else (SQLite's BUSY or LOCKED, a
 * PostgreSQL lock that could not be taken)? The one rule for "the store is locked".
 */
export const isLockedCode = (code: string): boolean =>
  code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED") || code === "55P03"

export const reasonForCode = (code: string): StorageFailureReason => {
  if (code === "SQLITE_FULL" || code === "53100" || code === "ENOSPC") return "disk-full"
  if (code.startsWith("SQLITE_IOERR") || code === "58030" || code === "EIO") return "io-error"
  if (isLockedCode(code)) return "busy"
  if (code.startsWith("SQLITE_CONSTRAINT") || code.startsWith("23")) return "constraint"
  if (code.startsWith("SQLITE_CORRUPT") || code === "SQLITE_NOTADB" || code === "XX001") return "corrupt"
  if (code.startsWith("SQLITE_READONLY") || code === "25006") return "read-only"
  if (code === "40001" || code === "40P01") return "serialization"
  if (code.startsWith("08") || code === "57P01" || code === "ECONNRESET" || code === "ECONNREFUSED") {
    return "connection"
  }
  return "unknown"
}

/**
 * Pure: does this failure of a dispatch on a SHARED store mean another writer committed first? A
 * unique violation (the same receipt, or the same aggregate version), a settlement whose row changed
 * since the batch read it (LOST_RACE_CODE), or a deadlock between two batches (40P01, PostgreSQL
 * aborted this one). Then the batch is run again on fresh state: a duplicate finds the stored
 * answer, a version clash or a moved row decides again. Only a writer that is not ordered with this
 * one (another process) can cause it.
 */
export const isLostRace = (failure: StorageFailure): boolean =>
  (failure.reason === "constraint" && failure.code === "23505") || failure.reason === "serialization"

/**
 * The code a write that lost a compare-and-set raises (a settlement's row moved since it was read):
 * PostgreSQL's own "could not serialize access due to concurrent update", which is what it is.
 */
export const LOST_RACE_CODE = "40001"

/** A write the schema refused: which constraint, under which driver code, and the driver's words. */
export interface ConstraintViolation {
  readonly code: string
  readonly constraint: string
  readonly message: string
}

/**
 * The constraint a statement violated (SQLite's SQLITE_CONSTRAINT*, PostgreSQL's SQLSTATE class 23),
 * or undefined for any other error. Such a refusal is the statement's, not the store's: the disk is
 * healthy and the same write fails the same way every time. Classified by code; the name comes from
 * node-postgres' `constraint` field, or SQLite's message (`UNIQUE constraint failed: table.column`),
 * which is the only place better-sqlite3 gives it.
 */
export const constraintViolation = (error: unknown): ConstraintViolation | undefined => {
  const code = codeOf(error)
  if (reasonForCode(code) !== "constraint") return undefined
  const cause =
    typeof error === "object" && error !== null && "cause" in error ? (error as { cause: unknown }).cause : error
  const message = driverMessage(cause, code)
  const named =
    typeof cause === "object" && cause !== null && "constraint" in cause
      ? (cause as { constraint: unknown }).constraint
      : undefined
  const constraint =
    typeof named === "string" && named !== "" ? named : (/constraint failed: (.+)$/.exec(message)?.[1] ?? code)
  return { code, constraint, message }
}

/**
 * The one reader of an error's code: the driver's (better-sqlite3's `code`, node-postgres' SQLSTATE)
 * under a SqlError, or the `code` of any thrown value that carries one (a Node.js system error's
 * `ENOSPC`). "UNKNOWN" when there is none.
 */
export const codeOf = (error: SqlError | unknown): string => {
  const cause =
    typeof error === "object" && error !== null && "cause" in error ? (error as { cause: unknown }).cause : error
  const code = driverCode(cause)
  return code === "UNKNOWN" ? driverCode(error) : code
}

export const toStorageFailure =
  (operation: string) =>
  (error: SqlError | unknown): StorageFailure => {
    if (error instanceof StorageFailure) return error
    const code = codeOf(error)
    const cause =
      typeof error === "object" && error !== null && "cause" in error ? (error as { cause: unknown }).cause : error
    return new StorageFailure({
      reason: reasonForCode(code),
      code,
      operation,
      message: `${operation}: ${driverMessage(cause, "storage refused the write")}`
    })
  }
