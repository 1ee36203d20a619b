/**
 * The messages a thread has queued behind its running turn, in order, as a persistent structure. The
 * queue has no bound (a trigger that fires faster than the thread's turns end, a turn waiting a weekend
 * for an approval), and it was an array copied whole on every `message.queued` and filtered on every
 * `turn.started`: 50,000 queued messages took minutes to fold. Here each operation is logarithmic and
 * shares the rest; a state folded earlier (the engine's cache keeps one while a batch decides on the
 * next) is never changed by a later one.
 */
import { HashMap, Option, Order, SortedMap } from "effect"

export interface QueuedMessage {
  readonly messageId: string
  readonly text: string
}

export interface MessageQueue {
  /** The position the next queued message takes: positions only grow, so their order is the queue's. */
  readonly next: number
  readonly byPosition: SortedMap.SortedMap<number, QueuedMessage>
  readonly positions: HashMap.HashMap<string, number>
}

export const empty: MessageQueue = { next: 0, byPosition: SortedMap.empty(Order.number), positions: HashMap.empty() }

/** Appends the message; one already queued keeps its place (ids are unique per thread, as decide checks). */
export const enqueue = (queue: MessageQueue, message: QueuedMessage): MessageQueue =>
  HashMap.has(queue.positions, message.messageId)
    ? queue
    : {
        next: queue.next + 1,
        byPosition: SortedMap.set(queue.byPosition, queue.next, message),
        positions: HashMap.set(queue.positions, message.messageId, queue.next)
      }

/** Takes the message out wherever it is (a turn started for it, or it was withdrawn); absent, nothing changes. */
export const remove = (queue: MessageQueue, messageId: string): MessageQueue => {
  const position = HashMap.get(queue.positions, messageId)
  return Option.isNone(position)
    ? queue
    : {
        next: queue.next,
        byPosition: SortedMap.remove(queue.byPosition, position.value),
        positions: HashMap.remove(queue.positions, messageId)
      }
}

/** The message queued first, if any. */
export const head = (queue: MessageQueue): QueuedMessage | undefined =>
  Option.getOrUndefined(Option.map(SortedMap.headOption(queue.byPosition), ([, message]) => message))

export const has = (queue: MessageQueue, messageId: string): boolean => HashMap.has(queue.positions, messageId)

/** In order, for a reader that lists them. */
export const toArray = (queue: MessageQueue): ReadonlyArray<QueuedMessage> =>
  Array.from(SortedMap.values(queue.byPosition))
