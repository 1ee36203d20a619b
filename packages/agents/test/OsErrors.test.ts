import { assert, describe, it } from "@effect/vitest"
import * as OsErrors from "../src/OsErrors.js"

describe("OS errors are classified once", () => {
  it("the environment's refusals are transient; the request's own problems are permanent", () => {
    for (const code of ["EAGAIN", "EBUSY", "ENOSPC", "EDQUOT", "EINTR", "EMFILE", "ENFILE", "EIO"]) {
      assert.strictEqual(OsErrors.classify(code), "transient", code)
    }
    for (const code of ["EISDIR", "ENOTDIR", "EEXIST", "ELOOP", "EACCES", "EPERM", "ENAMETOOLONG", "EINVAL"]) {
      assert.strictEqual(OsErrors.classify(code), "permanent", code)
    }
  })

  it("an unknown code is transient (the retry budget bounds it), and every code reads as the end of a sentence", () => {
    assert.strictEqual(OsErrors.classify("EWHATEVER"), "transient")
    assert.strictEqual(OsErrors.describe("EISDIR"), "is a directory, where a file is needed")
    assert.strictEqual(OsErrors.describe("EWHATEVER"), "failed (EWHATEVER)")
  })

  it("the code is read from a Node.js system error, and only from there", () => {
    assert.strictEqual(OsErrors.codeOf(Object.assign(new Error("x"), { code: "ENOSPC" })), "ENOSPC")
    assert.strictEqual(OsErrors.codeOf(new Error("ENOSPC: no space left")), "UNKNOWN")
    assert.strictEqual(OsErrors.codeOf(undefined), "UNKNOWN")
  })
})
