/**
 * One thread: its turns, its transcript with each tool call next to the effect row that performs
 * it (status, attempts, lease owner, response or error, retry/cancel), and every effect of the
 * thread, model steps included.
 */
import type { EffectRow, ThreadDetail, ToolCall, TranscriptMessage } from "../api.js"
import { errorReason, formatAge, formatAgo, preview, unreadableMessagesNote } from "../format.js"
import { StatusBadge } from "./Badges.js"
import { ApprovalActions } from "./ApprovalActions.js"
import { EffectActions } from "./EffectActions.js"
import { LiveText } from "./LiveText.js"
import { num, Table } from "./Table.js"

export interface ThreadViewProps {
  readonly threadId: string
  readonly detail: ThreadDetail | undefined
  readonly effects: ReadonlyArray<EffectRow>
  readonly missing: boolean
  readonly now: number
  readonly onChanged: () => void
  readonly onError: (error: unknown) => void
  /** The thread stream answered 401. */
  readonly onUnauthorized: () => void
}

const EffectCard = (props: {
  readonly threadId: string
  readonly effect: EffectRow | undefined
  readonly call: ToolCall | undefined
  readonly now: number
  readonly onChanged: () => void
  readonly onError: (e: unknown) => void
}) => {
  const { call, effect } = props
  if (effect === undefined && call?.approval?.status === "awaiting") {
    return (
      <div class="effect-card" data-testid="effect" data-status="awaiting-approval">
        <div class="effect-head">
          <StatusBadge status="awaiting-approval" testId="effect-status" />
          <span class="muted small">
            no effect row until approved; denied in {formatAge(call.approval.deadline - props.now)} unless answered
          </span>
          <ApprovalActions
            call={{ threadId: props.threadId, callId: call.transcriptId ?? call.callId }}
            onDone={props.onChanged}
            onError={props.onError}
          />
        </div>
      </div>
    )
  }
  if (effect === undefined) {
    return (
      <div class="effect-card" data-testid="effect" data-status={call?.status ?? "none"}>
        <span class="muted small">
          {call === undefined ? "no effect row" : `no effect row (${call.status}: the tool is unknown)`}
        </span>
      </div>
    )
  }
  const reason = errorReason(effect.error)
  return (
    <div class="effect-card" data-testid="effect" data-effect-id={effect.effectId} data-status={effect.status}>
      <div class="effect-head">
        <StatusBadge status={effect.status} testId="effect-status" />
        <span class="mono small">{effect.effectId}</span>
        <span class="muted small">attempts {effect.attempts}</span>
        <span class="muted small">lease {effect.leaseOwner ?? "–"}</span>
        <span class="muted small">updated {formatAgo(props.now - effect.updatedAt)}</span>
        <EffectActions effect={effect} onDone={props.onChanged} onError={props.onError} />
      </div>
      {effect.status === "succeeded" && effect.response !== null ? (
        <pre class="outcome ok">{preview(effect.response, 600)}</pre>
      ) : null}
      {reason !== undefined && effect.status !== "succeeded" ? (
        <pre class="outcome bad" data-testid="effect-error">
          {reason}
        </pre>
      ) : null}
    </div>
  )
}

const Message = (props: {
  readonly threadId: string
  readonly message: TranscriptMessage
  readonly calls: ReadonlyMap<string, ToolCall>
  readonly effects: ReadonlyMap<string, EffectRow>
  readonly now: number
  readonly onChanged: () => void
  readonly onError: (e: unknown) => void
}) => {
  const { message } = props
  switch (message.role) {
    case "user":
    case "system":
      return (
        <li class={`msg msg-${message.role}`}>
          <div class="role">{message.role}</div>
          <pre class="text">{preview(message.content, 2000)}</pre>
        </li>
      )
    case "tool":
      return (
        <li class="msg msg-tool">
          <div class="role">
            tool result <span class="mono small">{message.tool_call_id}</span>
          </div>
          <pre class="text">{preview(message.content, 1000)}</pre>
        </li>
      )
    case "assistant":
      return (
        <li class="msg msg-assistant">
          <div class="role">assistant</div>
          {message.content ? <pre class="text">{preview(message.content, 2000)}</pre> : null}
          {(message.tool_calls ?? []).map((toolCall) => {
            const call = props.calls.get(toolCall.id)
            const effect = call === undefined ? undefined : props.effects.get(call.effectId)
            return (
              <div class="tool-call" data-testid="tool-call" data-call-id={toolCall.id}>
                <div class="call-head">
                  <span class="call-name">{toolCall.function.name}</span>
                  <code class="small">{preview(toolCall.function.arguments, 300)}</code>
                </div>
                <EffectCard
                  threadId={props.threadId}
                  effect={effect}
                  call={call}
                  now={props.now}
                  onChanged={props.onChanged}
                  onError={props.onError}
                />
              </div>
            )
          })}
        </li>
      )
  }
}

export const ThreadView = (props: ThreadViewProps) => {
  const { detail, now } = props
  if (props.missing) {
    return (
      <section class="panel">
        <p class="empty">
          No thread <span class="mono">{props.threadId}</span>.
        </p>
      </section>
    )
  }
  if (detail === undefined)
    return (
      <section class="panel">
        <p class="empty">loading…</p>
      </section>
    )
  const calls = new Map<string, ToolCall>()
  for (const turn of detail.turns) for (const call of turn.toolCalls) calls.set(call.transcriptId ?? call.callId, call)
  const effects = new Map(props.effects.map((e) => [e.effectId, e]))
  const unreadableNote = unreadableMessagesNote(detail.unreadableMessages)
  return (
    <div class="thread-view" data-testid="thread-view" data-thread-id={detail.threadId}>
      <section class="panel">
        <header class="panel-head">
          <h2>
            Thread <span class="mono">{detail.threadId}</span>{" "}
            {detail.title ? <span class="muted">“{detail.title}”</span> : null}
          </h2>
          <StatusBadge status={detail.status} testId="thread-status" />
        </header>
        <Table
          compact
          columns={["Turn", "Status", num("Steps"), num("Tool calls"), "Reason"]}
          empty={detail.turns.length === 0 ? "no turns" : undefined}
        >
          {detail.turns.map((turn) => (
            <tr data-testid="turn" data-turn-id={turn.turnId}>
              <td class="mono">{turn.turnId}</td>
              <td>
                <StatusBadge status={turn.status} testId="turn-status" />
              </td>
              <td class="num">{turn.steps}</td>
              <td class="num">{turn.toolCalls.length}</td>
              <td class="muted">{turn.reason ?? ""}</td>
            </tr>
          ))}
        </Table>
      </section>
      <LiveText threadId={detail.threadId} onUnauthorized={props.onUnauthorized} />
      <section class="panel">
        <header class="panel-head">
          <h2>Transcript</h2>
          <span class="muted small">{detail.messages.length} messages</span>
        </header>
        {unreadableNote === undefined ? null : (
          <p class="notice" role="status" data-testid="transcript-unreadable">
            {unreadableNote}
          </p>
        )}
        <ol class="transcript" data-testid="transcript">
          {detail.messages.map((message) => (
            <Message
              threadId={detail.threadId}
              message={message}
              calls={calls}
              effects={effects}
              now={now}
              onChanged={props.onChanged}
              onError={props.onError}
            />
          ))}
        </ol>
      </section>
      <section class="panel">
        <header class="panel-head">
          <h2>Effects</h2>
          <span class="muted small">{props.effects.length} rows</span>
        </header>
        <Table compact columns={["Effect", "Kind", "Status", num("Attempts"), "Lease owner", "Response or error", ""]}>
          {props.effects.map((effect) => (
            <tr data-testid="effect-row" data-effect-id={effect.effectId} data-status={effect.status}>
              <td class="mono small">{effect.effectId}</td>
              <td class="mono">{effect.kind}</td>
              <td>
                <StatusBadge status={effect.status} />
              </td>
              <td class="num">{effect.attempts}</td>
              <td class="mono small">{effect.leaseOwner ?? "–"}</td>
              <td class="small clip">
                {effect.status === "succeeded" ? preview(effect.response, 120) : (errorReason(effect.error) ?? "")}
              </td>
              <td>
                <EffectActions effect={effect} onDone={props.onChanged} onError={props.onError} />
              </td>
            </tr>
          ))}
        </Table>
      </section>
    </div>
  )
}
