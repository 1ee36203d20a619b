import { assert, describe, it } from "@effect/vitest"
import { EffectOutcomes } from "../src/index.js"

const now = 100_000

/** Given: a row as the settlement rule sees it. */
const row = (fields: Partial<EffectOutcomes.SettlementTarget> = {}): EffectOutcomes.SettlementTarget => ({
  effectId: "e1",
  kind: "work",
  aggregateType: "job",
  aggregateId: "j1",
  status: "failed",
  attempts: 1,
  payload: {},
  error: { message: "no" },
  leaseOwner: null,
  leaseExpiresAt: null,
  leaseHolder: undefined,
  operatorActions: 0,
  ...fields
})

/** When: an operator's action, as the server builds it (no attempt: what the operator sent). */
const action = (type: "effect.retry" | "effect.cancel", attempt?: number): EffectOutcomes.OperatorCommand => ({
  type,
  commandId: "op-1",
  effectId: "e1",
  aggregateType: "job",
  aggregateId: "j1",
  by: "operator",
  ...(attempt === undefined ? {} : { attempt })
})

const verdict = (
  target: EffectOutcomes.SettlementTarget | undefined,
  type: "effect.retry" | "effect.cancel",
  attempt?: number
) => {
  const decision = EffectOutcomes.decideOperatorAction(target, action(type, attempt), now)
  return decision._tag === "Refused" ? decision.reason : decision._tag === "Apply" ? decision.change : decision._tag
}

describe("the operator action rule", () => {
  it("retry: a failed or cancelled row goes back to pending and counts the action; anything else is refused with its reason", () => {
    assert.deepStrictEqual(verdict(row(), "effect.retry"), {
      status: "pending",
      availableAt: now,
      operatorAction: true
    })
    assert.deepStrictEqual(verdict(row({ status: "cancelled" }), "effect.retry"), {
      status: "pending",
      availableAt: now,
      operatorAction: true
    })
    for (const status of ["pending", "running", "succeeded"])
      assert.strictEqual(verdict(row({ status }), "effect.retry"), "not-retryable")
    assert.strictEqual(verdict(undefined, "effect.retry"), "no-such-effect")
    assert.strictEqual(verdict(row({ aggregateId: "j2" }), "effect.retry"), "no-such-effect")
    assert.strictEqual(verdict(row(), "effect.retry", 2), "attempt-moved")
  })

  it("retry: a row failed by process loss may have taken effect and is never retried; other failures are", () => {
    assert.strictEqual(
      verdict(row({ error: { message: "server process ended", code: "process-ended" } }), "effect.retry"),
      "may-have-taken-effect"
    )
    assert.strictEqual(
      verdict(row({ error: { message: "owner stopped", code: "owner-lost" } }), "effect.retry"),
      "may-have-taken-effect"
    )
    assert.deepStrictEqual(verdict(row({ error: { message: "bounced", code: "bounced" } }), "effect.retry"), {
      status: "pending",
      availableAt: now,
      operatorAction: true
    })
  })

  it("retry of a cancelled row: refused while its cancelled performance may still run, allowed once its owner stopped it or is gone", () => {
    const cancelled = (fields: Partial<EffectOutcomes.SettlementTarget>) =>
      row({ status: "cancelled", leaseOwner: "w1", leaseExpiresAt: now + 20_000, ...fields })
    const live = { heartbeatAt: now - 500, stoppedAt: null }
    // The lease is held and its owner beats: the handler may still run.
    assert.strictEqual(verdict(cancelled({ leaseHolder: live }), "effect.retry"), "performance-may-be-running")
    // Lease ran out, but the owner beat after that: alive, it has not said its handler stopped.
    assert.strictEqual(
      verdict(cancelled({ leaseExpiresAt: now - 5_000, leaseHolder: live }), "effect.retry"),
      "performance-may-be-running"
    )
    // The owner acknowledged (lease cleared), stopped, has no heartbeat row, or died before its lease ran out.
    const allowed: EffectOutcomes.RowChange = { status: "pending", availableAt: now, operatorAction: true }
    assert.deepStrictEqual(verdict(cancelled({ leaseOwner: null, leaseExpiresAt: null }), "effect.retry"), allowed)
    assert.deepStrictEqual(
      verdict(cancelled({ leaseHolder: { heartbeatAt: now - 500, stoppedAt: now - 400 } }), "effect.retry"),
      allowed
    )
    assert.deepStrictEqual(verdict(cancelled({ leaseHolder: undefined }), "effect.retry"), allowed)
    assert.deepStrictEqual(
      verdict(
        cancelled({ leaseExpiresAt: now - 5_000, leaseHolder: { heartbeatAt: now - 30_000, stoppedAt: null } }),
        "effect.retry"
      ),
      allowed
    )
    // The owner beat on after the lease ran out (its handler slow to stop), then died unmarked (SIGKILL):
    // silent for an hour, it is gone, and the row is not blocked for good.
    assert.deepStrictEqual(
      verdict(
        cancelled({
          leaseExpiresAt: now - 2 * 3_600_000,
          leaseHolder: { heartbeatAt: now - 3_600_000, stoppedAt: null }
        }),
        "effect.retry"
      ),
      allowed
    )
    // Silent for less than the bound (a pause, a slow store), it may still be stopping its handler.
    assert.strictEqual(
      verdict(
        cancelled({ leaseExpiresAt: now - 120_000, leaseHolder: { heartbeatAt: now - 60_000, stoppedAt: null } }),
        "effect.retry"
      ),
      "performance-may-be-running"
    )
  })

  it("cancel: a pending row is cancelled; a running one too, keeping its lease owner until the handler stopped; a settled one is refused", () => {
    const error = JSON.stringify({ message: "cancelled by an operator", reason: "cancelled" })
    assert.deepStrictEqual(verdict(row({ status: "pending" }), "effect.cancel"), {
      status: "cancelled",
      error,
      keepLease: false,
      operatorAction: true
    })
    assert.deepStrictEqual(verdict(row({ status: "running", leaseOwner: "w1" }), "effect.cancel"), {
      status: "cancelled",
      error,
      keepLease: true,
      operatorAction: true
    })
    for (const status of ["succeeded", "failed", "cancelled"])
      assert.strictEqual(verdict(row({ status }), "effect.cancel"), "not-cancellable")
  })
})

describe("the default operator command id", () => {
  it("a client may send a default id of this action on this effect, of its state now or before, no other", () => {
    const row = { effectId: "job:j1", attempts: 2, operatorActions: 1 }
    const soFar = (id: string) => EffectOutcomes.isOperatorIdSoFar(id, "retry", row)
    for (const id of ["operator:retry:job:j1#2.1", "operator:retry:job:j1#1.1", "operator:retry:job:j1#7.0"])
      assert.isTrue(soFar(id), id)
    for (const id of [
      "operator:retry:job:j1#3.1", // more attempts than now
      "operator:retry:job:j1#0.2", // more actions than now
      "operator:cancel:job:j1#2.1", // another action
      "operator:retry:job:j2#2.1", // another effect
      "operator:retry:job:j1#01.1",
      "operator:retry:job:j1#2"
    ])
      assert.isFalse(soFar(id), id)
  })

  const target = {
    effectId: "e1",
    aggregateType: "job",
    aggregateId: "j1",
    attempts: 2,
    operatorActions: 1,
    updatedAt: 5_000
  }

  it("names the row's state: attempts and the operator actions applied so far", () => {
    assert.strictEqual(
      EffectOutcomes.defaultOperatorId("retry", { ...target, operatorActions: 0 }, undefined),
      "operator:retry:e1#2.0"
    )
    assert.strictEqual(EffectOutcomes.defaultOperatorId("retry", target, undefined), "operator:retry:e1#2.1")
  })

  it("a request that finds the row as the same action left it repeats that action's id; after any later change it is a new action", () => {
    assert.strictEqual(EffectOutcomes.previousOperatorId("cancel", target), "operator:cancel:e1#2.0")
    assert.strictEqual(
      EffectOutcomes.defaultOperatorId("cancel", target, { status: "accepted", acceptedAt: 5_000 }),
      "operator:cancel:e1#2.0"
    )
    assert.strictEqual(
      EffectOutcomes.defaultOperatorId("cancel", target, { status: "accepted", acceptedAt: 4_000 }),
      "operator:cancel:e1#2.1"
    )
    assert.strictEqual(EffectOutcomes.defaultOperatorId("cancel", target, undefined), "operator:cancel:e1#2.1")
  })

  it("the command holds what the operator sent, never the row's state", () => {
    assert.deepStrictEqual(EffectOutcomes.operatorCommand("retry", target, "mine"), {
      type: "effect.retry",
      commandId: "mine",
      effectId: "e1",
      aggregateType: "job",
      aggregateId: "j1",
      by: "operator"
    })
  })
})
