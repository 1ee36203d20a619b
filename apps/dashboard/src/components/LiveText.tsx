/**
 * A thread's model output as it streams (GET /v1/threads/:id/stream): the running step's answer
 * growing, and partial text that will never be the answer, marked superseded, interrupted or failed.
 * The recorded answer itself is the transcript's; this panel shows what is not there (yet).
 */
import { useEffect, useState } from "preact/hooks"
import { followThread, type StreamState } from "../eventStream.js"
import { applyLive, type LiveAttempt, type LiveMessage } from "../liveText.js"

const label: Record<LiveAttempt["status"], string> = {
  streaming: "streaming…",
  superseded: "superseded by a newer attempt — not the answer",
  interrupted: "interrupted — not the answer",
  failed: "failed — not the answer"
}

export const LiveText = (props: { readonly threadId: string; readonly onUnauthorized: () => void }) => {
  const [attempts, setAttempts] = useState<ReadonlyArray<LiveAttempt>>([])
  const [state, setState] = useState<StreamState>("connecting")
  useEffect(() => {
    setAttempts([])
    return followThread({
      threadId: props.threadId,
      onState: (next) => {
        setState(next)
        if (next === "unauthorized") props.onUnauthorized()
      },
      onMessage: (message) => setAttempts((previous) => applyLive(previous, message as LiveMessage))
    })
  }, [props.threadId])
  return (
    <section class="panel" data-testid="live" data-stream-state={state}>
      <header class="panel-head">
        <h2>Live output</h2>
        <span class="muted small">{state}</span>
      </header>
      {attempts.length === 0 ? (
        <p class="empty small">nothing streaming</p>
      ) : (
        <ol class="transcript">
          {attempts.map((a) => (
            <li
              class={`msg msg-assistant live-${a.status}`}
              data-testid="live-text"
              data-status={a.status}
              data-turn-id={a.turnId}
              data-step={a.step}
              data-attempt={a.attempt}
            >
              <div class="role">
                assistant · step {a.step} · attempt {a.attempt} ·{" "}
                <span data-testid="live-status">{label[a.status]}</span>
                {a.reason === undefined ? null : <span class="muted small"> ({a.reason})</span>}
              </div>
              {a.text === "" ? null : <pre class="text">{a.text}</pre>}
              {(a.toolCalls ?? []).map((c) => (
                <pre class="text muted small" data-testid="live-tool-call" data-tool-call-id={c.id}>
                  tool call {c.id}: {c.args}
                </pre>
              ))}
            </li>
          ))}
        </ol>
      )}
    </section>
  )
}
