/** A thread's queue of messages waiting for its running turn, as pure operations. */
import { assert, describe, it } from "@effect/vitest"
import * as MessageQueue from "../src/MessageQueue.js"

const m = (id: string) => ({ messageId: id, text: `text of ${id}` })
const ids = (queue: MessageQueue.MessageQueue) => MessageQueue.toArray(queue).map((q) => q.messageId)
const abc = [m("a"), m("b"), m("c")].reduce(MessageQueue.enqueue, MessageQueue.empty)

describe("MessageQueue", () => {
  it("given a, b, c queued, when b is withdrawn, then a is first and c follows it", () => {
    const withoutB = MessageQueue.remove(abc, "b")
    assert.deepStrictEqual(ids(withoutB), ["a", "c"])
    assert.deepStrictEqual(MessageQueue.head(withoutB), m("a"))
    assert.deepStrictEqual(MessageQueue.head(MessageQueue.remove(withoutB, "a")), m("c"))
    assert.isFalse(MessageQueue.has(withoutB, "b"))
  })

  it("given a, b, c queued, when a is queued again, then it keeps its place; an absent id removes nothing", () => {
    assert.deepStrictEqual(ids(MessageQueue.enqueue(abc, m("a"))), ["a", "b", "c"])
    assert.strictEqual(MessageQueue.remove(abc, "z"), abc)
  })

  it("given a queue, when it is changed, then the queue it was changed from is as it was (a cached state)", () => {
    const drained = MessageQueue.remove(MessageQueue.remove(MessageQueue.enqueue(abc, m("d")), "a"), "b")
    assert.deepStrictEqual(ids(drained), ["c", "d"])
    assert.deepStrictEqual(ids(abc), ["a", "b", "c"])
    assert.isTrue(MessageQueue.has(abc, "a"))
    assert.strictEqual(MessageQueue.head(MessageQueue.empty), undefined)
  })
})
