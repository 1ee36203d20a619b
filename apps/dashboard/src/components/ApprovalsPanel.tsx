/** The calls waiting for an operator's approval, each with its arguments, deadline and Approve / Deny. */
import type { PendingApproval } from "../api.js"
import { approvalArguments, formatAge } from "../format.js"
import { ApprovalActions } from "./ApprovalActions.js"

export interface ApprovalsPanelProps {
  readonly approvals: ReadonlyArray<PendingApproval>
  readonly now: number
  readonly onOpenThread: (threadId: string) => void
  readonly onChanged: () => void
  readonly onError: (error: unknown) => void
}

export const ApprovalsPanel = (props: ApprovalsPanelProps) => (
  <section class="panel" data-testid="approvals">
    <header class="panel-head">
      <h2>Awaiting approval</h2>
      <span class="muted small" data-testid="approvals-total">
        {props.approvals.length}
      </span>
    </header>
    {props.approvals.length === 0 ? (
      <p class="empty">no calls await approval</p>
    ) : (
      <ul class="approvals">
        {props.approvals.map((a) => (
          <li
            key={`${a.threadId}/${a.callId}`}
            data-testid="approval"
            data-thread-id={a.threadId}
            data-call-id={a.callId}
          >
            <div class="call-head">
              <span class="call-name">{a.name}</span>{" "}
              <a
                href={`#/threads/${encodeURIComponent(a.threadId)}`}
                class="mono small"
                onClick={(e) => {
                  e.preventDefault()
                  props.onOpenThread(a.threadId)
                }}
              >
                {a.threadId}
              </a>{" "}
              <span class="mono small muted">{a.callId}</span>{" "}
              <span class="muted small">
                {a.deadline > props.now
                  ? `denied in ${formatAge(a.deadline - props.now)} unless answered`
                  : "deadline passed"}
              </span>
            </div>
            <pre class="text small" data-testid="approval-arguments">
              {approvalArguments(a)}
            </pre>
            <ApprovalActions call={a} onDone={props.onChanged} onError={props.onError} />
          </li>
        ))}
      </ul>
    )}
  </section>
)
