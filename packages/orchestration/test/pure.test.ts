import { assert, describe, it } from "@effect/vitest"
import { CanonicalJson, CommandId, Receipts, StorageErrors } from "../src/index.js"

describe("canonical JSON and fingerprints", () => {
  it("sorts keys at every depth and drops undefined, so key order never changes a fingerprint", () => {
    assert.strictEqual(CanonicalJson.canonicalJson({ b: 1, a: { d: [1, { z: 1, y: 2 }], c: undefined } }), '{"a":{"d":[1,{"y":2,"z":1}]},"b":1}')
    assert.strictEqual(CanonicalJson.fingerprint({ a: 1, b: 2 }), CanonicalJson.fingerprint({ b: 2, a: 1 }))
    assert.notStrictEqual(CanonicalJson.fingerprint({ a: 1 }), CanonicalJson.fingerprint({ a: "1" }))
  })
})

describe("command ids", () => {
  it("clients get 1-128 safe characters and no reserved prefix; the engine gets 512", () => {
    assert.isUndefined(CommandId.commandIdProblem("abc:DEF.1_2-3#4", "client"))
    assert.include(CommandId.commandIdProblem("a".repeat(129), "client")!, "1 to 128")
    assert.isUndefined(CommandId.commandIdProblem("a".repeat(129), "internal"))
    assert.include(CommandId.commandIdProblem("a".repeat(513), "internal")!, "1 to 512")
    assert.include(CommandId.commandIdProblem("reconcile:x#1", "client")!, "reserved")
    assert.isUndefined(CommandId.commandIdProblem("reconcile:x#1", "internal"))
    assert.include(CommandId.commandIdProblem("a b", "client")!, "may only contain")
    assert.include(CommandId.commandIdProblem(42, "client")!, "string")
    assert.isTrue(CommandId.isReservedType("effect.succeed"))
    assert.isFalse(CommandId.isReservedType("account.open"))
  })
})

describe("receipt matching", () => {
  const stored: Receipts.CommandIdentity = {
    commandId: "c",
    aggregateType: "account",
    aggregateId: "a",
    commandType: "account.open",
    fingerprint: "f"
  }
  it("the same identity matches; any difference is a conflict that says what differs", () => {
    assert.isUndefined(Receipts.conflictWith(stored, { ...stored }))
    assert.include(Receipts.conflictWith(stored, { ...stored, fingerprint: "g" })!, "another payload")
    assert.include(Receipts.conflictWith(stored, { ...stored, aggregateId: "b" })!, "'b'")
    assert.include(Receipts.conflictWith(stored, { ...stored, aggregateType: "thread" })!, "thread")
    assert.include(Receipts.conflictWith(stored, { ...stored, commandType: "account.close" })!, "account.close")
  })
})

describe("storage error classification", () => {
  it("reads SQLite and PostgreSQL codes", () => {
    const cases: ReadonlyArray<readonly [string, string]> = [
      ["SQLITE_FULL", "disk-full"],
      ["53100", "disk-full"],
      ["SQLITE_IOERR_FSYNC", "io-error"],
      ["SQLITE_BUSY", "busy"],
      ["SQLITE_CONSTRAINT_PRIMARYKEY", "constraint"],
      ["23505", "constraint"],
      ["SQLITE_CORRUPT", "corrupt"],
      ["SQLITE_READONLY", "read-only"],
      ["40001", "serialization"],
      ["08006", "connection"],
      ["SOMETHING_ELSE", "unknown"]
    ]
    for (const [code, reason] of cases) assert.strictEqual(StorageErrors.reasonForCode(code), reason, code)
  })
})
