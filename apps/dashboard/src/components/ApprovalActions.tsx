/**
 * Approve and Deny for one call waiting for an operator. Deny asks why (the model reads it); a
 * refusal (the call was answered meanwhile, its deadline passed, its turn ended) shows its reason.
 */
import { useState } from "preact/hooks"
import { ApiError, answerApproval } from "../api.js"

export interface ApprovalActionsProps {
  readonly call: { readonly threadId: string; readonly callId: string }
  readonly onDone: () => void
  readonly onError: (error: unknown) => void
}

export const ApprovalActions = ({ call, onDone, onError }: ApprovalActionsProps) => {
  const [busy, setBusy] = useState(false)
  const run = (verdict: "approve" | "deny") => {
    const reason = verdict === "deny" ? window.prompt(`Why deny call ${call.callId}? (the model reads it)`) : undefined
    if (reason === null) return
    setBusy(true)
    answerApproval(verdict, call, reason?.trim().slice(0, 2000))
      .then(onDone, (error: unknown) => {
        onDone()
        onError(error instanceof ApiError ? new Error(`${verdict} refused: ${error.message}`) : error)
      })
      .finally(() => setBusy(false))
  }
  return (
    <span class="actions">
      <button type="button" data-testid="approve" disabled={busy} onClick={() => run("approve")}>
        Approve
      </button>
      <button type="button" class="danger" data-testid="deny" disabled={busy} onClick={() => run("deny")}>
        Deny
      </button>
    </span>
  )
}
