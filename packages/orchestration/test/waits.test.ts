import { assert, describe, it } from "@effect/vitest"
import { Waits } from "../src/index.js"

const timeoutCommand = { type: "approval.timeout", ownerId: "o-1" }
const given = (waits: Waits.WaitsState = Waits.empty) => waits
const openedOnce = Waits.opened(Waits.empty, "deploy", { status: "open", deadline: 10_000, token: "r-1" })

describe("Waits: pure deciders, given / when / then", () => {
  it("given no wait, when opened, then a deadline timer carries the timeout command with name and token", () => {
    const decided = Waits.open(given(), { name: "deploy", deadline: 10_000, token: "r-1", timeout: timeoutCommand })
    assert.deepStrictEqual(decided, {
      wait: { status: "open", deadline: 10_000, token: "r-1" },
      timers: [
        {
          timerId: "wait.deploy",
          at: 10_000,
          command: { type: "approval.timeout", ownerId: "o-1", wait: "deploy", token: "r-1" }
        }
      ]
    })
  })

  it("given an open wait, when opened again, then it is refused", () => {
    const decided = Waits.open(openedOnce, { name: "deploy", deadline: 20_000, token: "r-2", timeout: timeoutCommand })
    assert.deepStrictEqual(Waits.isRejection(decided) && decided.reason, "wait-already-open")
  })

  it("given an open wait, when answered, then the deadline timer is cancelled", () => {
    assert.deepStrictEqual(Waits.answer(openedOnce, "deploy"), { cancelTimers: ["wait.deploy"] })
  })

  it("given an answered wait, when the timeout arrives, then it is a rejection (wait-closed)", () => {
    const answered = Waits.closed(openedOnce, "deploy", "answered")
    const decided = Waits.timeout(answered, "deploy", "r-1")
    assert.deepStrictEqual(Waits.isRejection(decided) && decided.reason, "wait-closed")
  })

  it("given a timed-out wait, when answered, then it is a rejection (wait-closed)", () => {
    const expired = Waits.closed(openedOnce, "deploy", "timed-out")
    const decided = Waits.answer(expired, "deploy")
    assert.deepStrictEqual(Waits.isRejection(decided) && decided.reason, "wait-closed")
  })

  it("given a wait reopened after an answer, when the first opening's timeout arrives, then it is stale", () => {
    const reopened = Waits.opened(Waits.closed(openedOnce, "deploy", "answered"), "deploy", {
      status: "open",
      deadline: 30_000,
      token: "r-2"
    })
    const stale = Waits.timeout(reopened, "deploy", "r-1")
    assert.deepStrictEqual(Waits.isRejection(stale) && stale.reason, "wait-closed")
    assert.deepStrictEqual(Waits.timeout(reopened, "deploy", "r-2"), { cancelTimers: [] })
  })

  it("given no wait of that name, when answered, then it is unknown", () => {
    const decided = Waits.answer(given(), "deploy")
    assert.deepStrictEqual(Waits.isRejection(decided) && decided.reason, "wait-unknown")
  })
})
