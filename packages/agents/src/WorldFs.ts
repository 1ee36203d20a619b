/**
 * The file operations of the world directory, which never follow a symbolic link below the world's
 * root: every parent directory is checked with lstat (and created one level at a time, never with a
 * recursive mkdir that would follow a link), and every file is opened with O_NOFOLLOW. A link
 * planted inside the world (by a sandboxed command, by an operator's mistake) is refused with ELOOP
 * instead of letting a write land outside. The root itself is the operator's choice and may be a link.
 *
 * Errors are mapped here, once, to WorldWriteError / WorldReadError with the path relative to the
 * root (the model never learns the server's absolute paths) and the OS error's class.
 *
 * Known limit: Node has no openat(2), so a directory swapped for a link between its lstat and the
 * open below it is not detected; the checks stop links that are in place, not a racing attacker.
 */
import { Effect, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { constants } from "node:fs"
import * as fs from "node:fs/promises"
import * as nodePath from "node:path"
import * as OsErrors from "./OsErrors.js"

/** A write to the world directory was refused (`code` is the OS error code, e.g. ENOSPC). */
export class WorldWriteError extends Schema.TaggedError<WorldWriteError>()("WorldWriteError", {
  operation: Schema.String,
  /** Relative to the world directory. */
  path: Schema.String,
  code: Schema.String,
  /** Whether the same write may succeed later (disk full) or never will as asked (a directory in the way). */
  reason: OsErrors.OsErrorClass,
  message: Schema.String
}) {}

/** Reading the world back failed, or a line in it is not what we wrote. */
export class WorldReadError extends Schema.TaggedError<WorldReadError>()("WorldReadError", {
  path: Schema.String,
  code: Schema.String,
  reason: OsErrors.OsErrorClass,
  message: Schema.String
}) {}

/** A relative path under the root, as `/`-separated segments already validated by the caller. */
const segmentsOf = (relative: string) => relative.split("/")

/** An error shaped like Node's system errors, for a refusal decided here. */
const systemError = (code: string, path: string) => Object.assign(new Error(`${code}: ${path}`), { code, path })

const lstatIfExists = (path: string) =>
  fs.lstat(path).catch((cause: unknown) => (OsErrors.codeOf(cause) === "ENOENT" ? undefined : Promise.reject(cause)))

/** Walks `segments` below `root`: each must be a real directory; missing ones are created when asked. */
const walkDirectories = async (root: string, segments: ReadonlyArray<string>, create: boolean): Promise<boolean> => {
  let current = root
  for (const segment of segments) {
    current = nodePath.join(current, segment)
    let stat = await lstatIfExists(current)
    if (stat === undefined) {
      if (!create) return false
      await fs
        .mkdir(current)
        .catch((cause: unknown) => (OsErrors.codeOf(cause) === "EEXIST" ? undefined : Promise.reject(cause)))
      // Created here or by a concurrent writer: either way it must now be a real directory.
      stat = await fs.lstat(current)
    }
    if (stat.isSymbolicLink()) throw systemError("ELOOP", current)
    if (!stat.isDirectory()) throw systemError("ENOTDIR", current)
  }
  return true
}

const appendFlags = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW
const createFlags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW
const readFlags = constants.O_RDONLY | constants.O_NOFOLLOW

const writeAll = async (path: string, flags: number, content: string) => {
  const handle = await fs.open(path, flags, 0o644)
  try {
    await handle.writeFile(content, "utf8")
  } finally {
    await handle.close()
  }
}

/** The path an error is about, relative to the root; `fallback` when the error names none under it. */
const relativeTo = (root: string, cause: unknown, fallback: string) => {
  const path =
    typeof cause === "object" && cause !== null && "path" in cause && typeof cause.path === "string"
      ? cause.path
      : undefined
  const relative = path === undefined ? fallback : nodePath.relative(root, path)
  return relative === "" || relative.startsWith("..") || nodePath.isAbsolute(relative) ? fallback : relative
}

const writeError = (root: string, operation: string, target: string) => (cause: unknown) => {
  const code = OsErrors.codeOf(cause)
  const path = relativeTo(root, cause, target)
  return new WorldWriteError({
    operation,
    path,
    code,
    reason: OsErrors.classify(code),
    message: `${path} ${OsErrors.describe(code)} (${code})`
  })
}

export const readError = (path: string, code: string, message: string) =>
  new WorldReadError({ path, code, reason: OsErrors.classify(code), message })

/**
 * Appends one line in one O_APPEND write: concurrent appenders and a crash leave the line whole or
 * absent, never interleaved with another. Missing parent directories are created.
 */
export const appendLine = (
  root: string,
  relative: string,
  value: unknown,
  operation: string
): Effect.Effect<void, WorldWriteError> =>
  Effect.tryPromise({
    try: async () => {
      await walkDirectories(root, segmentsOf(relative).slice(0, -1), true)
      await writeAll(nodePath.join(root, relative), appendFlags, `${JSON.stringify(value)}\n`)
    },
    catch: writeError(root, operation, relative)
  })

/**
 * Writes the file whole or not at all: the content goes to a temporary file with a name no other
 * writer uses (so concurrent writers of one target never share it), which is then renamed over the
 * target. With `keepExisting` a target that exists already, at the content's size, is left as it
 * is: for content-addressed files, whose name says what they hold (one cut short, as a power loss
 * after an unsynced rename can leave it, is written again).
 */
export const writeFileAtomic = (
  root: string,
  relative: string,
  content: string,
  options: { readonly operation: string; readonly keepExisting: boolean }
): Effect.Effect<void, WorldWriteError> =>
  Effect.tryPromise({
    try: async () => {
      await walkDirectories(root, segmentsOf(relative).slice(0, -1), true)
      const target = nodePath.join(root, relative)
      const existing = await lstatIfExists(target)
      if (existing?.isSymbolicLink()) throw systemError("ELOOP", target)
      if (existing?.isDirectory()) throw systemError("EISDIR", target)
      if (existing !== undefined && options.keepExisting && existing.size === Buffer.byteLength(content, "utf8")) return
      const temporary = nodePath.join(nodePath.dirname(target), `.${nodePath.basename(target)}.${randomUUID()}.partial`)
      try {
        await writeAll(temporary, createFlags, content)
        await fs
          .rename(temporary, target)
          .catch((cause: unknown) => Promise.reject(systemError(OsErrors.codeOf(cause), target)))
      } catch (cause) {
        // The write already failed and that failure is what the caller gets.
        await fs.rm(temporary, { force: true }).catch(() => undefined) // swallow-ok: a leftover temporary file is clutter, not lost data

        throw cause
      }
    },
    catch: writeError(root, options.operation, relative)
  })

/** Reads a file under the root without following links; a file (or parent) that does not exist reads as undefined. */
export const readText = (root: string, relative: string): Effect.Effect<string | undefined, WorldReadError> =>
  Effect.tryPromise({
    try: async () => {
      if (!(await walkDirectories(root, segmentsOf(relative).slice(0, -1), false))) return undefined
      return await fs
        .readFile(nodePath.join(root, relative), { encoding: "utf8", flag: readFlags })
        .catch((cause: unknown) => (OsErrors.codeOf(cause) === "ENOENT" ? undefined : Promise.reject(cause)))
    },
    catch: (cause) => {
      const code = OsErrors.codeOf(cause)
      const path = relativeTo(root, cause, relative)
      return readError(path, code, `${path} ${OsErrors.describe(code)} (${code})`)
    }
  })
