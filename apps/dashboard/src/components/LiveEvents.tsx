/** The newest events of the stream, each linking to its thread. */
import type { StreamEvent } from "../eventStream.js"
import { formatAgo } from "../format.js"

export const LiveEvents = (props: { readonly recent: ReadonlyArray<StreamEvent>; readonly now: number }) => (
  <section class="panel" data-testid="live-events">
    <header class="panel-head">
      <h2>Live events</h2>
    </header>
    {props.recent.length === 0 ? (
      <p class="empty">waiting for events…</p>
    ) : (
      <ul class="events">
        {props.recent.map((event) => (
          <li key={event.sequence}>
            <span class="mono muted">#{event.sequence}</span> <span class="mono">{event.type}</span>{" "}
            <a href={`#/threads/${encodeURIComponent(event.aggregateId)}`} class="mono">
              {event.aggregateId}
            </a>{" "}
            <span class="muted small">{formatAgo(props.now - event.occurredAt)}</span>
          </li>
        ))}
      </ul>
    )}
  </section>
)
