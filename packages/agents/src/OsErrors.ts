/**
 * What an operating-system error code means for the one who asked: the rule, in one place, that
 * decides whether a failed file operation may succeed if repeated (the disk fills and frees, a
 * descriptor table empties) or never will as asked (a directory sits where a file is needed, a link
 * is refused), and the words that tell a model what is wrong with the path it chose.
 */
import { StorageErrors } from "@orchestration/engine"
import { Schema } from "effect"

/**
 * `transient`: the environment refused for now; repeating the same request may succeed.
 * `permanent`: the request itself cannot succeed; repeating it only delays the answer.
 */
export const OsErrorClass = Schema.Literal("transient", "permanent")
export type OsErrorClass = typeof OsErrorClass.Type

/** Codes caused by the request (its path, its permissions, its shape): retrying cannot help. */
const permanent: Readonly<Record<string, string>> = {
  EISDIR: "is a directory, where a file is needed",
  ENOTDIR: "has a parent that is a file, where a directory is needed",
  EEXIST: "already exists",
  ELOOP: "is, or goes through, a symbolic link, which the world refuses to follow",
  EACCES: "is not accessible (permission denied)",
  EPERM: "is not permitted by the file system",
  ENAMETOOLONG: "has a name too long for the file system",
  EINVAL: "is not a valid name or operation on this file system",
  ENOTEMPTY: "is a directory that is not empty",
  EXDEV: "would cross file systems",
  EBADF: "was used through a closed descriptor",
  EFBIG: "would grow beyond the largest file allowed",
  // Not OS codes: the world's own findings about what it read back, which no retry changes.
  MALFORMED_LINE: "holds a line the world did not write",
  MALFORMED_FILE: "holds content the world did not write",
  INVALID_CID: "is not a content id"
}

/** Codes of the environment (space, descriptors, devices, interruptions): worth another attempt. */
const transient: Readonly<Record<string, string>> = {
  EAGAIN: "is temporarily unavailable",
  EBUSY: "is busy",
  ENOSPC: "cannot be written: the disk is full",
  EDQUOT: "cannot be written: the disk quota is exhausted",
  EINTR: "was interrupted",
  EMFILE: "cannot be opened: this process has too many open files",
  ENFILE: "cannot be opened: the system has too many open files",
  EIO: "met an input/output error",
  ENOMEM: "cannot be handled: out of memory",
  ETIMEDOUT: "timed out",
  ESTALE: "is a stale network file handle",
  EROFS: "is on a file system mounted read-only",
  // A directory created a moment ago vanished (an operator cleaning up): the next attempt recreates it.
  ENOENT: "has a parent that disappeared while it was written"
}

/**
 * Pure: the class of an OS error code. A code not listed is taken as transient: the retry budget
 * bounds what that costs, while calling a passing condition permanent would fail work for nothing.
 */
export const classify = (code: string): OsErrorClass => (code in permanent ? "permanent" : "transient")

/** Pure: what is wrong, as the end of a sentence whose subject is the path. */
export const describe = (code: string): string => permanent[code] ?? transient[code] ?? `failed (${code})`

/** The `code` of a Node.js system error, or "UNKNOWN" for anything else (the engine's one reader). */
export const codeOf = (cause: unknown): string => StorageErrors.codeOf(cause)
